// The API client: the access token lives in this module's memory only; the refresh token is
// an HttpOnly cookie the server sets on /web/auth, which this script never reads.

const CSRF = { "X-Threadline-CSRF": "1" };
let token = null;
let expiresAt = 0;
let refreshTimer = null;
let refreshing = null;
let user = null;
const listeners = new Set();

export class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

let notice = "";

/** A message for the sign-in page (e.g. after an erasure); read once. */
export function setNotice(text) {
  notice = text;
}

export function takeNotice() {
  const text = notice;
  notice = "";
  return text;
}

export function currentUser() {
  return user;
}

export function onAuthChange(listener) {
  listeners.add(listener);
}

function notify() {
  for (const listener of listeners) listener(user);
}

export async function toError(response) {
  let code = "http_" + response.status;
  let message = "";
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || "";
    }
  } catch {
    // not JSON: the status speaks for itself
  }
  const retry = Number.parseInt(response.headers.get("Retry-After") || "", 10);
  return new ApiError(response.status, code, message, Number.isNaN(retry) ? null : retry);
}

/** A sentence a person understands, never raw JSON. */
export function humanError(error) {
  if (!(error instanceof ApiError)) {
    if (error && error.name === "AbortError") return "Cancelled.";
    return "The server cannot be reached. Check your connection and try again.";
  }
  switch (error.code) {
    case "rate_limited":
      return `Too many requests: try again in ${error.retryAfter ?? 60} s.`;
    case "token_quota_exceeded": {
      const hours = error.retryAfter ? Math.ceil(error.retryAfter / 3600) : null;
      return "Today's token quota is used up" + (hours ? `; it renews in about ${hours} h.` : ".");
    }
    case "unsupported_file_type":
      return "This file type is refused: upload a PDF, plain-text or Markdown file.";
    case "payload_too_large":
    case "document_too_long":
      return "This file is too large.";
    case "empty_file":
      return "This file is empty.";
    case "invalid_credentials":
      return "The e-mail or password is wrong.";
    case "login_throttled":
      return `Too many failed logins: try again in ${error.retryAfter ?? 60} s.`;
    case "admin_required":
      return "This page is for administrators only.";
    case "export_busy":
      return `Too many exports are running: try again in ${error.retryAfter ?? 30} s.`;
    case "validation_error":
      return "Some of what you entered is not valid: " + (error.message || "please check it.");
    default:
      if (error.status >= 500) return "The server had a problem. Please try again in a moment.";
      return error.message || `The request failed (${error.status}).`;
  }
}

function setToken(body) {
  token = body.access_token;
  expiresAt = Date.now() + body.expires_in * 1000;
  clearTimeout(refreshTimer);
  // Silent refresh a minute before expiry (or at 80 % of a short life).
  const lead = Math.min(60_000, body.expires_in * 200);
  refreshTimer = setTimeout(() => refresh().catch(() => signedOut()), body.expires_in * 1000 - lead);
}

function signedOut() {
  token = null;
  user = null;
  clearTimeout(refreshTimer);
  notify();
}

async function cookiePost(path, body) {
  const headers = { ...CSRF };
  if (body) headers["Content-Type"] = "application/json";
  return fetch(path, {
    method: "POST",
    headers,
    body: body ? JSON.stringify(body) : undefined,
    credentials: "same-origin",
  });
}

async function refresh() {
  if (!refreshing) {
    refreshing = (async () => {
      const response = await cookiePost("/web/auth/refresh");
      if (!response.ok) throw await toError(response);
      setToken(await response.json());
    })().finally(() => {
      refreshing = null;
    });
  }
  return refreshing;
}

async function loadUser() {
  user = await api("/me");
  notify();
  return user;
}

export async function login(email, password, tenant) {
  const body = { email, password };
  if (tenant) body.tenant = tenant;
  const response = await cookiePost("/web/auth/login", body);
  if (!response.ok) throw await toError(response);
  setToken(await response.json());
  return loadUser();
}

/** On page load: a session from the refresh cookie, if there is one. */
export async function restore() {
  try {
    await refresh();
    return await loadUser();
  } catch {
    token = null;
    return null;
  }
}

export async function logout() {
  try {
    await cookiePost("/web/auth/logout");
  } finally {
    signedOut();
  }
}

/** Forget the session locally (after an erasure the server has nothing left to revoke). */
export async function forget() {
  await cookiePost("/web/auth/logout").catch(() => null);
  signedOut();
}

export async function authHeaders() {
  if (!token || Date.now() > expiresAt - 10_000) await refresh();
  return { Authorization: `Bearer ${token}` };
}

/** fetch() with the bearer token; one silent refresh and retry on 401. */
export async function request(path, options = {}) {
  const send = async () =>
    fetch(path, { ...options, headers: { ...(options.headers || {}), ...(await authHeaders()) } });
  let response = await send();
  if (response.status === 401 && token) {
    try {
      await refresh();
    } catch {
      signedOut();
      throw await toError(response);
    }
    response = await send();
  }
  return response;
}

/** JSON in, JSON out; errors thrown as ApiError. */
export async function api(path, { method = "GET", body, signal, form } = {}) {
  const options = { method, signal };
  if (form) {
    options.body = form;
  } else if (body !== undefined) {
    options.body = JSON.stringify(body);
    options.headers = { "Content-Type": "application/json" };
  }
  const response = await request(path, options);
  if (!response.ok) throw await toError(response);
  if (response.status === 204) return null;
  return response.json();
}

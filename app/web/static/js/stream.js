// One streamed turn: POST /chat/stream, then, whenever the connection drops, resume with
// GET /chat/{turn_id}/stream and Last-Event-ID (or re-post with the same Idempotency-Key
// before the turn id is known). Event ids count from 1 per stream: an id at or below the
// last one seen is a replay and is skipped, so no text is doubled or lost.

import { ApiError, request, toError } from "./api.js";
import { readEvents } from "./sse.js";

const MAX_RETRIES = 40;

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function online() {
  if (navigator.onLine) return Promise.resolve();
  return new Promise((resolve) => window.addEventListener("online", () => resolve(), { once: true }));
}

export function stoppedError() {
  return new DOMException("Stopped by the user", "AbortError");
}

/** `promise`, or a rejection with an AbortError as soon as `signal` aborts (whatever the
 * promise is waiting for: a fetch to an unreachable server, a token refresh, a back-off). */
function unlessAborted(promise, signal) {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(stoppedError());
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(stoppedError());
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

export function newKey() {
  return crypto.randomUUID();
}

/**
 * Stream one turn (or follow a running one, given its `turnId`). `onEvent(event)` gets each
 * event once, in order; `onReconnect(n)` is told of each resume attempt. Resolves with the
 * terminal `done` or `error` event; rejects with an AbortError at once when `signal` aborts
 * (Stop while the server cannot be reached: nothing is retried after that).
 */
export async function streamTurn({ body, key, turnId: known, onEvent, onReconnect, onTurnId, signal }) {
  let lastId = 0;
  let turnId = known || null;
  // Going offline cuts the connection at once (a dead socket can otherwise hang for
  // minutes); the loop then waits for the network and resumes.
  let connection = null;
  const cut = () => connection?.abort();
  const post = () =>
    request("/chat/stream", {
      method: "POST",
      signal: connection.signal,
      headers: { "Content-Type": "application/json", "Idempotency-Key": key, Accept: "text/event-stream" },
      body: JSON.stringify(body),
    });
  const resume = () =>
    request(`/chat/${turnId}/stream`, {
      signal: connection.signal,
      headers: { "Last-Event-ID": String(lastId), Accept: "text/event-stream" },
    });
  const learn = (id) => {
    if (id && !turnId) {
      turnId = id;
      onTurnId?.(id);
    }
  };

  async function once() {
    const response = await (turnId ? resume : post)();
    if (!response.ok) throw await toError(response);
    learn(response.headers.get("X-Turn-Id"));
    for await (const event of readEvents(response)) {
      if (event.id !== null) {
        if (event.id <= lastId) continue; // a replay of what was already shown
        lastId = event.id;
      }
      if (event.name === "meta") learn(event.data.turn_id);
      onEvent(event);
      if (event.name === "done" || event.name === "error") return event;
    }
    return null; // the body ended without a terminal event: the connection dropped
  }

  window.addEventListener("offline", cut);
  signal?.addEventListener("abort", cut);
  try {
    for (let attempt = 0; ; attempt++) {
      connection = new AbortController();
      try {
        const terminal = await unlessAborted(once(), signal);
        if (terminal) return terminal;
      } catch (error) {
        if (signal?.aborted) throw stoppedError();
        if (error instanceof ApiError || attempt >= MAX_RETRIES) throw error;
      }
      onReconnect?.(attempt + 1);
      await unlessAborted(online(), signal);
      await unlessAborted(sleep(Math.min(250 * 2 ** Math.min(attempt, 4), 4000)), signal);
    }
  } finally {
    window.removeEventListener("offline", cut);
    signal?.removeEventListener("abort", cut);
  }
}

/** Ask the server to stop a running turn; the stream then ends with `done` (stopped). */
export async function stopTurn(turnId) {
  const response = await request(`/chat/${turnId}/stop`, { method: "POST" });
  if (!response.ok && response.status !== 404) throw await toError(response);
}

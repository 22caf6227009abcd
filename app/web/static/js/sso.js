// Single sign-on on the sign-in page: for an organisation with an OpenID provider, a
// "Sign in with …" button (a plain link: the server sends the browser to the provider and
// back, ending with the same refresh cookie a password login sets), and the reason when a
// sign-in was refused. The organisation comes from `?org=` or the page's organisation field.

import { h } from "./dom.js";

const REFUSALS = {
  bad_state: "The sign-in expired or was started in another browser. Please try again.",
  wrong_issuer: "The answer did not come from your organisation's identity provider.",
  id_token_expired: "The identity provider's answer had expired. Check the clocks, then try again.",
  id_token_replayed: "The identity provider's answer belonged to another sign-in. Please try again.",
  code_refused: "The identity provider refused to complete this sign-in. Please try again.",
  email_domain_refused: "Your e-mail address's domain may not sign in to this organisation.",
  email_unverified: "Your identity provider has not verified your e-mail address.",
  email_missing: "Your identity provider did not send an e-mail address.",
  account_disabled: "This account is disabled.",
  provider_unavailable: "Your organisation's identity provider cannot be reached. Try again later.",
};

/** The reason of a refused single sign-on, once (taken out of the address bar). */
export function takeRefusal() {
  const params = new URLSearchParams(location.search);
  const code = params.get("sso_error");
  if (!code) return "";
  params.delete("sso_error");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + (rest ? `?${rest}` : "") + location.hash);
  return REFUSALS[code] || "Single sign-on did not succeed. Please try again.";
}

const REMEMBERED = "threadline.organisation";

/** `?org=`, else the organisation whose SSO this browser used last. */
export function organisationFromAddress() {
  const named = new URLSearchParams(location.search).get("org");
  if (named) return named;
  try {
    return localStorage.getItem(REMEMBERED) || "";
  } catch {
    return "";
  }
}

function remember(organisation) {
  try {
    localStorage.setItem(REMEMBERED, organisation);
  } catch {
    // storage refused
  }
}

/**
 * Keep `slot` showing the organisation's "Sign in with …" button; `onPasswordLogin(allowed)`
 * hides the password fields of an organisation that signs in only through SSO.
 */
export async function showSignInOptions(slot, organisation, email, onPasswordLogin) {
  slot.replaceChildren();
  onPasswordLogin(true);
  if (!organisation) return;
  let options;
  try {
    const response = await fetch(`/sso/options?${new URLSearchParams({ tenant: organisation })}`);
    if (!response.ok) return;
    options = await response.json();
  } catch {
    return; // the password form still works
  }
  for (const option of options.sso) {
    const link = h("a", { class: "button primary sso", href: option.login_url }, `Sign in with ${option.display_name}`);
    link.addEventListener("click", () => {
      remember(organisation);
      const hint = email();
      if (hint) link.href = `${option.login_url}?${new URLSearchParams({ login_hint: hint })}`;
    });
    slot.append(link);
  }
  onPasswordLogin(options.password_login);
}

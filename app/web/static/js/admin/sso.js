// The tenant's single sign-on: its OpenID provider (the client secret is write-only: the
// server never sends it back, only whether one is stored) and whether passwords still work.

import { ApiError, api } from "../api.js";
import { h } from "../dom.js";
import { confirmAction, frame, statusLine } from "./common.js";

function field(id, label, input, hint) {
  return [h("label", { for: id }, label), input, hint ? h("p", { class: "muted", id: `${id}-hint` }, hint) : null];
}

function checkbox(id, label, checked, hint = null) {
  const input = h("input", { type: "checkbox", id, checked, "aria-describedby": hint ? `${id}-hint` : null });
  return [input, h("label", { for: id, class: "check" }, input, ` ${label}`)];
}

export async function render(main) {
  const status = statusLine();
  let current = null;
  try {
    current = await api("/admin/sso");
  } catch (e) {
    if (!(e instanceof ApiError && e.code === "sso_not_configured")) throw e;
  }
  const text = (id, value, attrs = {}) => h("input", { type: "text", id, value: value ?? "", ...attrs });
  const name = text("s-name", current?.display_name, { required: true });
  const issuer = text("s-issuer", current?.issuer, { required: true, placeholder: "https://login.example.com" });
  const clientId = text("s-client", current?.client_id, { required: true });
  const secret = h("input", { type: "password", id: "s-secret", autocomplete: "off", "aria-describedby": "s-secret-hint" });
  const domains = text("s-domains", (current?.allowed_domains || []).join(", "), { required: true, "aria-describedby": "s-domains-hint" });
  const scopes = text("s-scopes", current?.scopes ?? "openid email profile");
  const groups = text("s-groups", current?.groups_claim, { placeholder: "groups" });
  const [enabled, enabledLabel] = checkbox("s-enabled", "Enabled", current ? current.enabled : true);
  const [passwords, passwordsLabel] = checkbox("s-passwords", "Password login allowed", current ? current.password_login : true, true);
  const passwordsHint = h(
    "p",
    { class: "muted", id: "s-passwords-hint" },
    "Unticked, nobody of this organisation signs in with a password while single sign-on is enabled, admins included. Sign in once with single sign-on (in a private window) before you untick it.",
  );
  const redirect = h("code", {}, current?.redirect_uri ?? `${location.origin}/sso/callback`);
  const remove = h("button", { type: "button", class: "danger", hidden: !current }, "Remove single sign-on");
  remove.addEventListener("click", async () => {
    const sure = await confirmAction({
      title: "Remove single sign-on?",
      message: "Its settings are deleted and everyone signs in with a password again.",
      confirm: "Remove single sign-on",
    });
    if (!sure) return;
    try {
      await api("/admin/sso", { method: "DELETE" });
      await render(main);
      statusAfterRender(main, "Single sign-on removed. Everyone signs in with a password.");
    } catch (e) {
      status.fail(e);
    }
  });
  const secretHint = current?.client_secret_set ? "A secret is stored; leave empty to keep it." : "Required.";
  const form = h(
    "form",
    { class: "card" },
    h("p", {}, "Register Threadline at your identity provider with the redirect URI ", redirect, "."),
    field("s-name", "Button label (Sign in with …)", name),
    field("s-issuer", "Issuer", issuer),
    field("s-client", "Client ID", clientId),
    field("s-secret", "Client secret", secret, secretHint),
    field("s-domains", "Allowed e-mail domains", domains, "Comma-separated. People of these domains are created as members on their first sign-in."),
    field("s-scopes", "Scopes", scopes),
    field("s-groups", "Groups claim (empty: groups are not read)", groups),
    h("div", { class: "row" }, h("div", {}, enabledLabel), h("div", {}, passwordsLabel)),
    passwordsHint,
    h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Save single sign-on"), remove),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {
      display_name: name.value.trim(),
      issuer: issuer.value.trim(),
      client_id: clientId.value.trim(),
      allowed_domains: domains.value.split(",").map((d) => d.trim()).filter(Boolean),
      scopes: scopes.value.trim() || "openid email profile",
      groups_claim: groups.value.trim() || null,
      enabled: enabled.checked,
      password_login: passwords.checked,
    };
    if (secret.value) body.client_secret = secret.value;
    const turningOff = !passwords.checked && enabled.checked && (current ? current.password_login || !current.enabled : true);
    if (turningOff) {
      const sure = await confirmAction({
        title: "Turn off password sign-in?",
        message: "From now on everyone of this organisation, you included, signs in only with single sign-on. If it does not work, only the command line (threadline) or an admin API key can turn passwords back on.",
        confirm: "Turn off passwords",
      });
      if (!sure) return;
    }
    try {
      current = await api("/admin/sso", { method: "PUT", body });
      secret.value = "";
      remove.hidden = false;
      status.say(current.password_login ? "Saved." : "Saved. Your users now sign in only through single sign-on.");
    } catch (e) {
      status.fail(e);
    }
  });
  frame(main, "Single sign-on", status.el, form);
}

/** After re-rendering, say what happened in the new page's status line. */
function statusAfterRender(main, message) {
  const line = main.querySelector("[role=status]");
  if (line) line.textContent = message;
}

// Users and API keys: the tenant's users (search, paged) with role, status, last sign-in and
// conversations; change a role, disable or enable, reset a password (shown once), erase
// behind a typed confirmation; add a user; API keys (shown once, with Copy) and revoking.

import { api, request, toError } from "../api.js";
import { h, mount } from "../dom.js";
import { copyText } from "../markdown.js";
import { confirmAction, frame, pager, statusLine, table, tag, when } from "./common.js";

function roleSelect(id, value = "member", label = null) {
  const select = h("select", { id, "aria-label": label }, h("option", { value: "member" }, "member"), h("option", { value: "admin" }, "admin"));
  select.value = value;
  return select;
}

function secret(value, label) {
  const copy = h("button", { type: "button", class: "secondary" }, "Copy");
  copy.addEventListener("click", () => copyText(value, copy, "Copy"));
  return h("div", { class: "secret" }, h("code", { "aria-label": label }, value), copy);
}

export async function render(main) {
  const status = statusLine();
  const me = await api("/me");

  // --- the users ----------------------------------------------------------------------------
  const search = h("input", { type: "search", id: "user-search", placeholder: "Search by e-mail", autocomplete: "off" });
  const list = h("div");
  const shownOnce = h("div", { role: "status" });
  let query = "";
  const draw = (items) =>
    mount(
      list,
      table(
        [
          ["E-mail", (u) => u.email],
          ["Role", (u) => roleCell(u)],
          ["Status", (u) => tag(u.status)],
          ["Last sign-in", (u) => (u.last_login_at ? when(u.last_login_at) : "never")],
          ["Conversations", (u) => String(u.conversations)],
          ["Actions", (u) => actions(u)],
        ],
        items,
        query ? "No user matches." : "No users.",
      ),
    );
  const paging = pager(
    (cursor) => {
      const params = new URLSearchParams({ limit: "25" });
      if (query) params.set("q", query);
      if (cursor) params.set("cursor", cursor);
      return api(`/admin/users?${params}`);
    },
    draw,
    status,
  );
  let typing = null;
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => {
      query = search.value.trim();
      paging.reset();
    }, 250);
  });

  function roleCell(user) {
    if (user.id === me.id) return user.role;
    const select = roleSelect(`role-${user.id}`, user.role, `Role of ${user.email}`);
    select.addEventListener("change", () => change(user, { role: select.value }, `${user.email} is now ${select.value}.`));
    return select;
  }

  function actions(user) {
    if (user.id === me.id) return h("span", { class: "muted" }, "you");
    const disabled = user.status === "disabled";
    const toggle = h("button", { type: "button", class: disabled ? "secondary" : "secondary danger" }, disabled ? "Enable" : "Disable");
    toggle.addEventListener("click", async () => {
      if (!disabled) {
        const sure = await confirmAction({
          title: `Disable ${user.email}?`,
          message: "Their sign-ins, open sessions and API keys stop working at once, until you enable them again.",
          confirm: "Disable",
        });
        if (!sure) return;
      }
      change(user, { disabled: !disabled }, `${user.email} is ${disabled ? "enabled" : "disabled"}.`);
    });
    const reset = h("button", { type: "button", class: "secondary" }, "Reset password");
    reset.addEventListener("click", async () => {
      const sure = await confirmAction({
        title: `Reset the password of ${user.email}?`,
        message: "A temporary password replaces theirs and is shown to you once; their open sessions end.",
        confirm: "Reset password",
      });
      if (!sure) return;
      try {
        const result = await api(`/admin/users/${user.id}/password`, { method: "POST" });
        mount(shownOnce, h("div", { class: "notice" }, h("p", {}, `Temporary password for ${user.email}, shown only now:`), secret(result.temporary_password, "Temporary password")));
        status.say(`Password reset for ${user.email}.`);
      } catch (e) {
        status.fail(e);
      }
    });
    const erase = h("button", { type: "button", class: "danger" }, "Erase");
    erase.addEventListener("click", async () => {
      const sure = await confirmAction({
        title: `Erase ${user.email}?`,
        message: "The user and all their data (conversations, attachments, their turns in the audit) are deleted at once. This cannot be undone.",
        confirm: "Erase user",
        typed: user.email,
      });
      if (!sure) return;
      try {
        const result = await api(`/admin/users/${user.id}`, { method: "DELETE" });
        status.say(`Erased ${user.email}: ${result.deleted.sessions} conversations, ${result.deleted.turns} turns.`);
        await paging.reset();
      } catch (e) {
        status.fail(e);
      }
    });
    return h("div", { class: "row actions" }, toggle, reset, erase);
  }

  async function change(user, body, news) {
    try {
      await api(`/admin/users/${user.id}`, { method: "PATCH", body });
      status.say(news);
    } catch (e) {
      status.fail(e);
    }
    await paging.reset();
  }

  const usersCard = h("section", { class: "card", "aria-labelledby": "users-title" }, h("h2", { id: "users-title" }, "Users"), h("label", { for: "user-search" }, "Search"), search, shownOnce, list, paging.el);

  // --- add a user ----------------------------------------------------------------------------
  const email = h("input", { type: "email", id: "user-email", required: true });
  const password = h("input", { type: "password", id: "user-password", required: true, autocomplete: "new-password" });
  const role = roleSelect("user-role");
  const userForm = h("form", { class: "card", "aria-labelledby": "users-new" }, h("h2", { id: "users-new" }, "Add a user"), h("label", { for: "user-email" }, "E-mail"), email, h("label", { for: "user-password" }, "Password"), password, h("label", { for: "user-role" }, "Role"), role, h("button", { type: "submit", class: "primary" }, "Add user"));
  userForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const user = await api("/admin/users", { method: "POST", body: { email: email.value, password: password.value, role: role.value } });
      status.say(`Added ${user.email}.`);
      email.value = "";
      password.value = "";
      await paging.reset();
    } catch (e) {
      status.fail(e);
    }
  });

  // --- API keys --------------------------------------------------------------------------------
  const keys = h("div");
  const keyPages = pager(pageOfKeys, drawKeys, status);
  const shown = h("div", { role: "status" });
  const keyName = h("input", { type: "text", id: "key-name", required: true, maxlength: "100" });
  const keyRole = roleSelect("key-role");
  const keyForm = h("form", { class: "card", "aria-labelledby": "keys-title" }, h("h2", { id: "keys-title" }, "API keys"), h("div", { class: "row" }, h("div", {}, h("label", { for: "key-name" }, "Name"), keyName), h("div", {}, h("label", { for: "key-role" }, "Role"), keyRole), h("button", { type: "submit", class: "primary" }, "Create key")), shown, keys, keyPages.el);
  const loadKeys = () => keyPages.reset();
  // A page of keys; the next one is named by the response's `Link: <…>; rel="next"`.
  async function pageOfKeys(cursor) {
    const response = await request(`/admin/api-keys?limit=10${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    if (!response.ok) throw await toError(response);
    const next = /cursor=([^&>]+)>;\s*rel="next"/.exec(response.headers.get("Link") || "");
    return { items: await response.json(), next_cursor: next ? decodeURIComponent(next[1]) : null };
  }
  function drawKeys(items) {
    mount(keys, table([["Name", (k) => k.name], ["Prefix", (k) => h("code", {}, k.prefix)], ["Role", (k) => k.role], ["Created", (k) => when(k.created_at)], ["Revoked", (k) => (k.revoked_at ? when(k.revoked_at) : "—")], ["Actions", (k) => (k.revoked_at ? "" : h("button", { type: "button", class: "secondary danger", onclick: () => revoke(k) }, "Revoke"))]], items, "No API keys."));
  }
  async function revoke(key) {
    const sure = await confirmAction({ title: `Revoke “${key.name}”?`, message: "Every client using this key is refused from now on.", confirm: "Revoke key" });
    if (!sure) return;
    try {
      await api(`/admin/api-keys/${key.id}`, { method: "DELETE" });
      status.say(`Revoked “${key.name}”.`);
      await loadKeys();
    } catch (e) {
      status.fail(e);
    }
  }
  keyForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const key = await api("/admin/api-keys", { method: "POST", body: { name: keyName.value, role: keyRole.value } });
      mount(shown, h("div", { class: "notice" }, h("p", {}, "Copy this key now; it is not shown again:"), secret(key.key, "New API key")));
      keyName.value = "";
      await loadKeys();
    } catch (e) {
      status.fail(e);
    }
  });

  frame(main, "Users & API keys", status.el, usersCard, h("div", { class: "row cards" }, userForm), keyForm);
  await Promise.all([paging.reset(), loadKeys()]);
}

// Users and API keys: create a user, erase one (by id: the API has no user listing yet),
// create API keys (shown once) and revoke them.

import { api } from "../api.js";
import { h, mount } from "../dom.js";
import { frame, statusLine, table, when } from "./common.js";

function roleSelect(id) {
  return h("select", { id }, h("option", { value: "member" }, "member"), h("option", { value: "admin" }, "admin"));
}

export async function render(main) {
  const status = statusLine();
  const created = h("div");
  const createdUsers = [];

  const email = h("input", { type: "email", id: "user-email", required: true });
  const password = h("input", { type: "password", id: "user-password", required: true, autocomplete: "new-password" });
  const role = roleSelect("user-role");
  const userForm = h("form", { class: "card", "aria-labelledby": "users-new" }, h("h2", { id: "users-new" }, "Add a user"), h("label", { for: "user-email" }, "E-mail"), email, h("label", { for: "user-password" }, "Password"), password, h("label", { for: "user-role" }, "Role"), role, h("button", { type: "submit", class: "primary" }, "Add user"), created);

  const drawUsers = () =>
    mount(created, table([["E-mail", (u) => u.email], ["Role", (u) => u.role], ["Id", (u) => h("code", {}, u.id)], ["", (u) => h("button", { type: "button", class: "secondary danger", onclick: () => erase(u.id) }, "Erase")]], createdUsers, ""));
  userForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const user = await api("/admin/users", { method: "POST", body: { email: email.value, password: password.value, role: role.value } });
      createdUsers.push(user);
      drawUsers();
      status.say(`Added ${user.email}.`);
      email.value = "";
      password.value = "";
    } catch (e) {
      status.fail(e);
    }
  });

  const eraseId = h("input", { type: "text", id: "erase-id", placeholder: "user id", required: true, pattern: "[0-9a-fA-F-]{36}" });
  const eraseForm = h("form", { class: "card danger-zone", "aria-labelledby": "users-erase" }, h("h2", { id: "users-erase" }, "Erase a user"), h("p", {}, "Deletes the user and all their data at once; it cannot be undone."), h("label", { for: "erase-id" }, "User id"), eraseId, h("button", { type: "submit", class: "danger" }, "Erase user"));
  async function erase(id) {
    try {
      const result = await api(`/admin/users/${id}`, { method: "DELETE" });
      status.say(`Erased: ${result.deleted.users} user, ${result.deleted.sessions} conversations, ${result.deleted.turns} turns.`);
      const index = createdUsers.findIndex((u) => u.id === id);
      if (index >= 0) createdUsers.splice(index, 1);
      drawUsers();
    } catch (e) {
      status.fail(e);
    }
  }
  eraseForm.addEventListener("submit", (event) => {
    event.preventDefault();
    erase(eraseId.value.trim());
  });

  const keys = h("div");
  const shown = h("div", { role: "status" });
  const keyName = h("input", { type: "text", id: "key-name", required: true, maxlength: "100" });
  const keyRole = roleSelect("key-role");
  const keyForm = h("form", { class: "card", "aria-labelledby": "keys-title" }, h("h2", { id: "keys-title" }, "API keys"), h("div", { class: "row" }, h("div", {}, h("label", { for: "key-name" }, "Name"), keyName), h("div", {}, h("label", { for: "key-role" }, "Role"), keyRole), h("button", { type: "submit", class: "primary" }, "Create key")), shown, keys);
  async function loadKeys() {
    const items = await api("/admin/api-keys");
    mount(keys, table([["Name", (k) => k.name], ["Prefix", (k) => h("code", {}, k.prefix)], ["Role", (k) => k.role], ["Created", (k) => when(k.created_at)], ["Revoked", (k) => (k.revoked_at ? when(k.revoked_at) : "—")], ["", (k) => (k.revoked_at ? "" : h("button", { type: "button", class: "secondary danger", onclick: () => revoke(k) }, "Revoke"))]], items, "No API keys."));
  }
  async function revoke(key) {
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
      mount(shown, h("p", { class: "notice" }, "Copy this key now; it is not shown again: ", h("code", {}, key.key)));
      keyName.value = "";
      await loadKeys();
    } catch (e) {
      status.fail(e);
    }
  });

  frame(main, "Users & API keys", status.el, h("div", { class: "row cards" }, userForm, eraseForm), keyForm);
  await loadKeys();
}

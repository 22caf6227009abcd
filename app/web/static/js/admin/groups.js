// Groups: the tenant's groups of users and their members (added by e-mail); collections
// can be shared with them (ADR 0078).

import { api } from "../api.js";
import { h, mount } from "../dom.js";
import { confirmAction, frame, statusLine, table, when } from "./common.js";

export async function render(main) {
  const status = statusLine();
  const list = h("div");
  const members = h("div");
  const name = h("input", { type: "text", id: "group-name", required: true, maxlength: "200" });
  const form = h("form", { class: "card", "aria-labelledby": "group-new" }, h("h2", { id: "group-new" }, "New group"), h("label", { for: "group-name" }, "Name"), name, h("button", { type: "submit", class: "primary" }, "Create"));

  async function load() {
    const { items } = await api("/admin/groups");
    mount(list, table([["Group", (g) => g.name], ["Members", (g) => String(g.members)], ["Created", (g) => when(g.created_at)], ["", (g) => h("span", { class: "row" }, h("button", { type: "button", class: "secondary", onclick: () => open(g.id) }, "Members"), h("button", { type: "button", class: "secondary danger", onclick: () => remove(g) }, "Delete"))]], items, "No groups yet."));
  }
  async function open(id) {
    const group = await api(`/admin/groups/${id}`);
    const email = h("input", { type: "email", id: "member-email", required: true, maxlength: "254" });
    const add = h("form", { class: "row" }, h("label", { for: "member-email" }, "Add by e-mail"), email, h("button", { type: "submit", class: "primary" }, "Add"));
    add.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        await api(`/admin/groups/${id}/members`, { method: "POST", body: { email: email.value } });
        status.say("Added.");
        await Promise.all([open(id), load()]);
      } catch (e) {
        status.fail(e);
      }
    });
    mount(members, h("section", { class: "card", "aria-labelledby": "group-members" }, h("h2", { id: "group-members" }, `Members of ${group.name}`), add, table([["E-mail", (m) => m.email], ["", (m) => h("button", { type: "button", class: "secondary danger", onclick: () => leave(id, m) }, "Remove")]], group.member_list, "No members yet.")));
  }
  async function leave(id, member) {
    try {
      await api(`/admin/groups/${id}/members/${member.user_id}`, { method: "DELETE" });
      status.say(`${member.email} removed: it applies to their next request.`);
      await Promise.all([open(id), load()]);
    } catch (e) {
      status.fail(e);
    }
  }
  async function remove(group) {
    const sure = await confirmAction({ title: `Delete ${group.name}?`, message: "Its members lose what it let them see at their next request.", confirm: "Delete group" });
    if (!sure) return;
    try {
      await api(`/admin/groups/${group.id}`, { method: "DELETE" });
      status.say("Deleted.");
      mount(members);
      await load();
    } catch (e) {
      status.fail(e);
    }
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await api("/admin/groups", { method: "POST", body: { name: name.value } });
      status.say("Created.");
      name.value = "";
      await load();
    } catch (e) {
      status.fail(e);
    }
  });
  frame(main, "Groups", status.el, form, h("section", { class: "card", "aria-labelledby": "group-list" }, h("h2", { id: "group-list" }, "Groups"), list), members);
  await load();
}

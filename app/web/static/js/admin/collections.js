// Collections: which documents whom may see — the whole tenant or chosen groups — with
// their documents, sizes and chunks; deleting one runs in the background (ADR 0078).

import { api } from "../api.js";
import { countOf, h, mount } from "../dom.js";
import { confirmAction, frame, statusLine, table, tag } from "./common.js";

function size(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

export async function render(main) {
  const status = statusLine();
  const list = h("div");
  const name = h("input", { type: "text", id: "collection-name", required: true, maxlength: "200" });
  const groupsBox = h("fieldset", {}, h("legend", {}, "Visible to"));
  const form = h("form", { class: "card", "aria-labelledby": "collection-new" }, h("h2", { id: "collection-new" }, "New collection"), h("label", { for: "collection-name" }, "Name"), name, groupsBox, h("button", { type: "submit", class: "primary" }, "Create"));
  let groups = [];

  function chosen(box) {
    return [...box.querySelectorAll("input[data-group]:checked")].map((i) => i.dataset.group);
  }
  function groupChoices(box, prefix, selected = []) {
    const legend = box.querySelector("legend");
    mount(box, legend, groups.length ? groups.map((g) => h("label", { class: "check" }, h("input", { type: "checkbox", id: `${prefix}-${g.id}`, "data-group": g.id, checked: selected.includes(g.id) }), g.name)) : h("p", { class: "muted" }, "No groups: the whole organisation."));
    box.append(h("p", { class: "muted" }, "No group ticked: everyone in the organisation."));
  }
  async function load() {
    groups = (await api("/admin/groups")).items;
    groupChoices(groupsBox, "new-group");
    const { items } = await api("/admin/collections");
    const names = Object.fromEntries(groups.map((g) => [g.id, g.name]));
    mount(list, table([
      ["Collection", (c) => h("span", {}, c.name, c.is_default ? " (default)" : "")],
      ["Visible to", (c) => (c.visibility === "tenant" ? "everyone" : c.group_ids.map((g) => names[g] || g).join(", ") || "nobody")],
      ["Documents", (c) => String(c.documents)],
      ["Size", (c) => size(c.size_bytes)],
      ["Chunks", (c) => String(c.chunks)],
      ["Status", (c) => (c.status === "deleting" ? h("span", {}, tag("deleting"), ` ${Math.round(c.deletion_progress * 100)} %`) : tag("active"))],
      ["", (c) => (c.status === "deleting" ? "" : h("span", { class: "row" }, h("button", { type: "button", class: "secondary", onclick: () => edit(c) }, "Change"), c.is_default ? "" : h("button", { type: "button", class: "secondary danger", onclick: () => remove(c) }, "Delete")))],
    ], items, "No collections."));
    if (items.some((c) => c.status === "deleting")) setTimeout(() => load().catch((e) => status.fail(e)), 2000);
  }
  async function edit(collection) {
    const rename = h("input", { type: "text", id: `rename-${collection.id}`, value: collection.name, maxlength: "200" });
    const box = h("fieldset", {}, h("legend", {}, "Visible to"));
    groupChoices(box, `edit-${collection.id}`, collection.visibility === "groups" ? collection.group_ids : []);
    const save = h("form", { class: "card" }, h("label", { for: `rename-${collection.id}` }, "Name"), rename, box, h("button", { type: "submit", class: "primary" }, "Save"));
    save.addEventListener("submit", async (event) => {
      event.preventDefault();
      const ids = chosen(box);
      try {
        await api(`/admin/collections/${collection.id}`, { method: "PATCH", body: { name: rename.value, visibility: ids.length ? "groups" : "tenant", group_ids: ids } });
        status.say("Saved: it applies to everyone's next request.");
        await load();
      } catch (e) {
        status.fail(e);
      }
    });
    mount(list, save);
  }
  async function remove(collection) {
    const sure = await confirmAction({ title: `Delete ${collection.name}?`, message: `Its ${countOf(collection.documents, "document")}, their chunks and vectors are removed. Nobody sees them from now on.`, confirm: "Delete collection" });
    if (!sure) return;
    try {
      await api(`/admin/collections/${collection.id}`, { method: "DELETE" });
      status.say("Deleting in the background.");
      await load();
    } catch (e) {
      status.fail(e);
    }
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const ids = chosen(groupsBox);
    try {
      await api("/admin/collections", { method: "POST", body: { name: name.value, visibility: ids.length ? "groups" : "tenant", group_ids: ids } });
      status.say("Created.");
      name.value = "";
      await load();
    } catch (e) {
      status.fail(e);
    }
  });
  frame(main, "Collections", status.el, form, h("section", { class: "card", "aria-labelledby": "collection-list" }, h("h2", { id: "collection-list" }, "Collections"), list));
  await load();
}

// A new chat's scope picker: the collections the user may search (`GET /collections`);
// ticking some restricts the conversation to them (`PATCH /sessions/{id}`, ADR 0078).

import { api } from "./api.js";
import { h, mount } from "./dom.js";

export function scopePicker() {
  const el = h("fieldset", { class: "scope-picker", hidden: true }, h("legend", {}, "Search in"));
  async function load() {
    let items;
    try {
      ({ items } = await api("/collections"));
    } catch {
      return; // the chat works without it
    }
    if (items.length < 2) return; // one collection: nothing to choose
    const legend = el.querySelector("legend");
    mount(el, legend, items.map((c) => h("label", { class: "check" }, h("input", { type: "checkbox", id: `scope-${c.id}`, "data-collection": c.id }), `${c.name} (${c.documents})`)), h("p", { class: "muted" }, "None ticked: every collection you may see."));
    el.hidden = false;
  }
  function chosen() {
    return [...el.querySelectorAll("input[data-collection]:checked")].map((i) => i.dataset.collection);
  }
  /** Restrict a just-created conversation to the ticked collections, if any. */
  async function apply(sessionId) {
    const ids = chosen();
    if (ids.length) await api(`/sessions/${sessionId}`, { method: "PATCH", body: { collection_ids: ids } });
  }
  return { el, load, apply };
}

// The conversation's scope picker: the collections the user may search (`GET /collections`);
// ticking some restricts the conversation to them (`PATCH /sessions/{id}`, ADR 0078). A new
// chat sends the ticks with its creation; a stored conversation shows its scope and saves a
// change at once, so the next question searches what the picker shows.

import { api, humanError } from "./api.js";
import { h, mount } from "./dom.js";

const EVERYTHING = "None ticked: every collection you may see.";

export function scopePicker() {
  const status = h("p", { class: "muted", "aria-live": "polite" }, EVERYTHING);
  const el = h("fieldset", { class: "scope-picker", hidden: true }, h("legend", {}, "Search in"));
  let sessionId = null;

  /** Show the picker for `session` (a stored conversation with its `collection_ids`; null:
   * a new chat). Nothing is shown when the user may see one collection only. */
  async function load(session = null) {
    sessionId = session?.id ?? null;
    let items;
    try {
      ({ items } = await api("/collections"));
    } catch {
      return; // the chat works without it
    }
    if (items.length < 2) return; // one collection: nothing to choose
    const ticked = new Set(session?.collection_ids ?? []);
    const boxes = items.map((c) =>
      h("label", { class: "check" }, h("input", { type: "checkbox", id: `scope-${c.id}`, "data-collection": c.id, checked: ticked.has(c.id), onchange: save }), `${c.name} (${c.documents})`),
    );
    mount(el, h("legend", {}, "Search in"), boxes, status);
    describe(chosen(), items);
    el.hidden = false;
  }
  function chosen() {
    return [...el.querySelectorAll("input[data-collection]:checked")].map((i) => i.dataset.collection);
  }
  function describe(ids) {
    const names = ids.map((id) => el.querySelector(`#scope-${CSS.escape(id)}`)?.parentElement?.textContent ?? id);
    status.textContent = ids.length ? `Searching only: ${names.join(", ")}.` : EVERYTHING;
    status.classList.remove("error");
  }
  /** A stored conversation: the change applies to its next question. */
  async function save() {
    if (!sessionId) {
      describe(chosen());
      return;
    }
    try {
      const updated = await api(`/sessions/${sessionId}`, { method: "PATCH", body: { collection_ids: chosen() } });
      for (const box of el.querySelectorAll("input[data-collection]")) box.checked = updated.collection_ids.includes(box.dataset.collection);
      describe(updated.collection_ids);
    } catch (e) {
      status.textContent = `Not saved: ${humanError(e)}`;
      status.classList.add("error");
    }
  }
  /** Restrict a just-created conversation to the ticked collections, if any. */
  async function apply(id) {
    sessionId = id;
    const ids = chosen();
    if (ids.length) await api(`/sessions/${id}`, { method: "PATCH", body: { collection_ids: ids } });
  }
  return { el, load, apply };
}

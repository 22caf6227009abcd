// The conversation's scope picker (`GET /collections`): ticks restrict it to those collections
// (`PATCH /sessions/{id}`, ADR 0078); a stored conversation saves a change at once.

import { api, humanError } from "./api.js";
import { h, mount } from "./dom.js";

const ALL = "None ticked: every collection you may see.";

export function scopePicker() {
  const status = h("p", { class: "muted", "aria-live": "polite" }, ALL);
  const el = h("fieldset", { class: "scope-picker", hidden: true });
  let sessionId = null;
  const boxes = () => [...el.querySelectorAll("input")];
  const chosen = () => boxes().filter((i) => i.checked).map((i) => i.value);
  const describe = () => {
    const names = boxes().filter((i) => i.checked).map((i) => i.parentElement.textContent);
    status.textContent = names.length ? `Searching only: ${names.join(", ")}.` : ALL;
  };

  /** `session`: a stored conversation (with `collection_ids`), or null for a new chat. */
  async function load(session = null) {
    sessionId = session?.id ?? null;
    let items;
    try {
      ({ items } = await api("/collections"));
    } catch {
      return; // the chat works without it
    }
    if (items.length < 2) return; // one collection: nothing to choose
    const ticked = session?.collection_ids ?? [];
    const labels = items.map((c) => h("label", { class: "check" }, h("input", { type: "checkbox", value: c.id, checked: ticked.includes(c.id), onchange: save }), `${c.name} (${c.documents})`));
    mount(el, h("legend", {}, "Search in"), labels, status);
    describe();
    el.hidden = false;
  }
  async function save() {
    if (!sessionId) return describe();
    try {
      const { collection_ids: ids } = await api(`/sessions/${sessionId}`, { method: "PATCH", body: { collection_ids: chosen() } });
      for (const box of boxes()) box.checked = ids.includes(box.value);
      describe();
    } catch (e) {
      status.textContent = `Not saved: ${humanError(e)}`;
    }
  }
  /** Restrict a just-created conversation to the ticked collections, if any. */
  async function apply(id) {
    sessionId = id;
    if (chosen().length) await api(`/sessions/${id}`, { method: "PATCH", body: { collection_ids: chosen() } });
  }
  return { el, load, apply };
}

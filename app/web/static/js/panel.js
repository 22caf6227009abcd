// The chat page's side panel: one shell, opened with a turn's sources or how its answer was
// built (their views, in panels.js, are loaded when first opened: not on the first load).

import { coversScreen, h, mount, trapFocus } from "./dom.js";

let panel = null;

export function createPanel() {
  panel = h("aside", { class: "panel", id: "panel", hidden: true, "aria-labelledby": "panel-title" });
  const own = panel;
  trapFocus(own, () => coversScreen(own));
  return panel;
}

export function closePanel() {
  if (!panel || panel.hidden) return false;
  panel.hidden = true;
  panel.returnFocus?.focus();
  return true;
}

export function open(title, body, returnFocus) {
  const close = h("button", { type: "button", class: "icon", "aria-label": "Close panel", onclick: closePanel }, "✕");
  mount(panel, h("header", {}, h("h2", { id: "panel-title", tabindex: "-1" }, title), close), body);
  panel.returnFocus = returnFocus;
  panel.hidden = false;
  panel.querySelector("h2").focus();
  return panel;
}

// A tiny element builder: h("button", {class: "x", onclick}, "text"). Text is always
// inserted as text nodes; HTML is only ever set from markdown.js's escaped output.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === "class") {
      el.className = value;
    } else if (key === "value" || key === "checked" || key === "disabled" || key === "hidden") {
      el[key] = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

/** "1 chunk", "3 chunks", "0 documents": a count with its noun in the right number. */
export function countOf(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function mount(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

export function announce(text) {
  const region = document.getElementById("announcer");
  if (!region) return;
  region.textContent = "";
  // A new text node after a tick, so screen readers announce a repeated message too.
  setTimeout(() => {
    region.textContent = text;
  }, 50);
}

export function formatDate(iso, timeStyle = "short") {
  if (!iso) return "";
  const date = new Date(iso);
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle });
}

export function errorBox(message) {
  return h("p", { class: "error", role: "alert" }, message);
}

const FOCUSABLE = 'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), summary, [tabindex]:not([tabindex="-1"])';

/** Keep Tab and Shift+Tab inside `container` while `active()` says it covers the page (a
 * full-screen panel on a phone), so the keyboard never reaches what lies hidden behind it. */
export function trapFocus(container, active) {
  container.addEventListener("keydown", (event) => {
    if (event.key !== "Tab" || !active()) return;
    const items = [...container.querySelectorAll(FOCUSABLE)].filter((el) => el.getClientRects().length > 0);
    if (!items.length) return;
    const [first, last] = [items[0], items[items.length - 1]];
    const current = document.activeElement;
    if (event.shiftKey && (current === first || !items.includes(current))) {
      event.preventDefault();
      last.focus();
    } else if (!event.shiftKey && current === last) {
      event.preventDefault();
      first.focus();
    }
  });
}

/** Whether `el` covers the screen (fixed, as the panels are on a phone). */
export function coversScreen(el) {
  return !el.hidden && getComputedStyle(el).position === "fixed";
}

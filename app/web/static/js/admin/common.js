// Pieces the admin pages share: a page frame, a status line, tables, and cursor paging.

import { humanError } from "../api.js";
import { formatDate, h, mount } from "../dom.js";

export function frame(main, title, ...sections) {
  const heading = h("h1", { tabindex: "-1" }, title);
  mount(main, h("div", { class: "page" }, heading, sections));
  heading.focus(); // a screen reader hears the new page's title
}

/** A status line: `say(text)` for news, `fail(error)` for an error as a sentence. */
export function statusLine() {
  const el = h("p", { role: "status", class: "muted" });
  return {
    el,
    say(text) {
      el.className = "muted";
      el.textContent = text;
    },
    fail(error) {
      el.className = "error";
      el.textContent = typeof error === "string" ? error : humanError(error);
    },
  };
}

/** A table of `rows` with `columns` [[header, (row) => cell]]. */
export function table(columns, rows, empty = "Nothing here yet.") {
  if (!rows.length) return h("p", { class: "muted" }, empty);
  return h(
    "div",
    { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "Table (scrolls sideways)" },
    h(
      "table",
      {},
      // A column of buttons has no visible heading; a screen reader still hears one.
      h("thead", {}, h("tr", {}, columns.map(([label]) => h("th", { scope: "col" }, label === "" ? h("span", { class: "sr-only" }, "Actions") : label)))),
      h("tbody", {}, rows.map((row) => h("tr", {}, columns.map(([, cell]) => h("td", {}, cell(row)))))),
    ),
  );
}

export function when(iso) {
  return formatDate(iso);
}

export function tag(text) {
  return h("span", { class: `tag ${text}` }, text);
}

/**
 * Cursor paging: `load(cursor)` returns {items, next_cursor}; `show(items)` draws a page.
 * Keeps the cursors seen, so "Previous" goes back without the API knowing pages.
 */
export function pager(load, show, status) {
  const previous = h("button", { type: "button", class: "secondary", disabled: true }, "Previous");
  const next = h("button", { type: "button", class: "secondary", disabled: true }, "Next");
  const label = h("span", { class: "muted" });
  const stack = [];
  let current = null;
  async function go(cursor) {
    try {
      const page = await load(cursor);
      current = cursor;
      show(page.items);
      previous.disabled = !stack.length;
      next.disabled = !page.next_cursor;
      next.dataset.cursor = page.next_cursor || "";
      label.textContent = `Page ${stack.length + 1}`;
    } catch (error) {
      status.fail(error);
    }
  }
  next.addEventListener("click", () => {
    stack.push(current);
    go(next.dataset.cursor);
  });
  previous.addEventListener("click", () => go(stack.pop() ?? null));
  return {
    el: h("div", { class: "row pager" }, previous, label, next),
    reset() {
      stack.length = 0;
      return go(null);
    },
  };
}

/**
 * Ask before a destructive action, in a modal dialog (focus stays inside; Esc cancels).
 * With `typed`, the confirm button works only once that exact text is typed.
 * Resolves true when confirmed.
 */
export function confirmAction({ title, message, confirm = "Confirm", typed = null }) {
  return new Promise((resolve) => {
    const input = typed
      ? h("input", { type: "text", id: "confirm-typed", autocomplete: "off", spellcheck: "false" })
      : null;
    const ok = h("button", { type: "submit", class: "danger", disabled: Boolean(typed) }, confirm);
    const cancel = h("button", { type: "button", class: "secondary" }, "Cancel");
    const form = h(
      "form",
      { method: "dialog" },
      h("h2", { id: "confirm-title" }, title),
      h("p", {}, message),
      typed ? [h("label", { for: "confirm-typed" }, "Type ", h("strong", {}, typed), " to confirm"), input] : null,
      h("div", { class: "row dialog-actions" }, cancel, ok),
    );
    const dialog = h("dialog", { class: "confirm", "aria-labelledby": "confirm-title" }, form);
    let confirmed = false;
    input?.addEventListener("input", () => {
      ok.disabled = input.value.trim() !== typed;
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (ok.disabled) return;
      confirmed = true;
      dialog.close();
    });
    cancel.addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(confirmed);
    });
    document.body.append(dialog);
    dialog.showModal();
    (input || cancel).focus();
  });
}

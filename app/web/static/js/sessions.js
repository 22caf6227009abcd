// The conversation list: the pinned ones first, under "Pinned" (`GET /sessions?pinned=true`),
// then the others newest first in date groups ("Today", "Yesterday", "Previous 7
// days", "Previous 30 days", then one a month), the next page loaded when its end scrolls
// into view (or by the "Load more" button, for the keyboard), and a search over titles and
// the text of turns that the server runs (`GET /sessions?q=`).

import { api } from "./api.js";
import { formatDate, h, mount } from "./dom.js";

const PAGE = 20;
const PINNED_MAX = 100; // one page: pins are a handful
const SEARCH_DELAY_MS = 250;
const DAY_MS = 24 * 60 * 60 * 1000;

/** The group a conversation started at `iso` goes under, seen from `now` (local days). */
export function dateGroup(iso, now = new Date()) {
  const date = new Date(iso);
  const midnight = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
  const days = Math.round((midnight(now) - midnight(date)) / DAY_MS);
  if (days <= 0) return "Today";
  if (days === 1) return "Yesterday";
  if (days <= 7) return "Previous 7 days";
  if (days <= 30) return "Previous 30 days";
  const month = date.toLocaleDateString(undefined, { month: "long" });
  return date.getFullYear() === now.getFullYear() ? month : `${month} ${date.getFullYear()}`;
}

/** The sidebar's list; `onError(message)` shows a failure, `currentId()` marks the open one. */
export function sessionList({ currentId, onError }) {
  const list = h("div", { class: "session-list" });
  const empty = h("p", { class: "muted session-empty", hidden: true });
  const more = h("button", { type: "button", class: "secondary", hidden: true }, "Load more");
  const search = h("input", { type: "search", class: "session-search", placeholder: "Search conversations", "aria-label": "Search conversations", maxlength: "200", autocomplete: "off" });
  let cursor = null;
  let loading = null;
  let generation = 0; // a reset or a new search makes the answers of older requests stale
  let group = null; // the last group's label and list
  let timer = null;

  function item(session, label = dateGroup(session.created_at)) {
    if (!group || group.label !== label) {
      const id = `group-${generation}-${list.childElementCount}`;
      group = { label, ul: h("ul", { "aria-labelledby": id }) };
      list.append(h("h2", { class: "session-group-title", id }, label), group.ul);
    }
    const link = h("a", { href: `#/c/${session.id}`, "aria-current": session.id === currentId() ? "page" : null }, h("span", { class: "t" }, session.title), h("span", { class: "d" }, formatDate(session.updated_at)));
    group.ul.append(h("li", {}, link));
  }

  /** Load the next page, or the first when `reset`; resolves once it is on screen. */
  function load(reset) {
    if (reset) {
      generation += 1;
      cursor = null;
      group = null;
      loading = null;
    } else if (loading || !cursor) {
      return loading || Promise.resolve();
    }
    const mine = generation;
    const query = new URLSearchParams({ limit: String(PAGE), pinned: "false" });
    if (cursor) query.set("cursor", cursor);
    const q = search.value.trim();
    if (q) query.set("q", q);
    const pinnedQuery = new URLSearchParams({ limit: String(PINNED_MAX), pinned: "true" });
    if (q) pinnedQuery.set("q", q);
    const pins = reset ? api(`/sessions?${pinnedQuery}`) : Promise.resolve(null);
    loading = Promise.all([pins, api(`/sessions?${query}`)])
      .then(([pinned, page]) => {
        if (mine !== generation) return;
        if (reset) mount(list);
        for (const session of pinned?.items || []) item(session, "Pinned");
        for (const session of page.items) item(session);
        cursor = page.next_cursor;
        more.hidden = !cursor;
        empty.hidden = list.childElementCount > 0;
        empty.textContent = q ? `No conversation matches “${q}”.` : "No conversations yet.";
      })
      .catch((e) => {
        if (mine === generation) onError(e);
      })
      .finally(() => {
        if (mine === generation) loading = null;
      });
    return loading;
  }

  more.addEventListener("click", () => load(false));
  // The end of the list coming into view (scrolled to, or a short list) loads the next page.
  const seen = new IntersectionObserver((entries) => {
    if (entries.some((entry) => entry.isIntersecting)) load(false)?.then(() => {
      // Still in view after the page came in (a tall screen): keep going.
      if (!more.hidden && more.isConnected) {
        seen.unobserve(more);
        seen.observe(more);
      }
    });
  });
  seen.observe(more);
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => load(true), SEARCH_DELAY_MS);
  });
  search.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && search.value) {
      event.preventDefault();
      event.stopPropagation(); // not the page's Esc (stop the answer, close the list)
      search.value = "";
      clearTimeout(timer);
      load(true);
    }
  });

  return { search, list, empty, more, load };
}

// The chat page: the conversation list (sessions.js; rename, pin, delete), the conversation with
// streamed answers, Stop (button or Esc), attachments and the side panel. A new chat
// (`#/new`) is stored by its first message, which also gives it its title.

import { ApiError, api, humanError } from "./api.js";
import { attachmentsBar } from "./attachments.js";
import { announce, countOf, coversScreen, errorBox, h, mount, trapFocus } from "./dom.js";
import { closePanel, createPanel } from "./panel.js";
import { scopePicker } from "./scope.js";
import { sessionList as conversationList } from "./sessions.js";
import { newKey, stopTurn, streamTurn } from "./stream.js";
import { turnView } from "./turns.js";

const DEFAULT_TITLE = "New conversation";
const DRAFT_TITLE = "New chat";
const TURNS_PAGE = 20;
// Within this distance of the top, the turns before are loaded.
const NEAR_TOP_PX = 300;
// After Stop, how long the server gets to end the stream itself (`done`, stopped) before the
// page stops following it on its own: Send must come back even when the server is unreachable.
const STOP_GRACE_MS = 1500;
// What "Continue" sends after a stopped answer (a new turn; the history carries the answer).
const CONTINUE_MESSAGE = "Continue your previous answer from where it stopped.";
let active = null; // the page on screen, for the global Esc handler

document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || !active) return;
  if (active.stop() || closePanel() || active.closeList()) event.preventDefault();
});

/** The newest conversation's id, or null when there is none (nothing is created). */
export async function latestSession() {
  const page = await api(`/sessions?limit=1`);
  return page.items.length ? page.items[0].id : null;
}

/** A title from the first question: its first line, at most 60 characters. */
function titleOf(message) {
  const line = message.split("\n", 1)[0].trim() || message.trim();
  return line.length > 60 ? `${line.slice(0, 57)}…` : line;
}

/** `sessionId` null: a new chat, not stored until its first message. */

export async function chatPage(main, sessionId) {
  const state = { session: null, streaming: null };
  const scope = scopePicker();
  const conversations = conversationList({ currentId: () => sessionId, onError: (e) => showFormError(humanError(e)) });
  const newChat = h("button", { type: "button", class: "primary" }, "New chat");
  const closeList = h("button", { type: "button", class: "secondary sidebar-close" }, "Close the list");
  const sidebar = h(
    "aside",
    { class: "sidebar", id: "sidebar", "aria-label": "Conversations" },
    closeList,
    newChat,
    conversations.search,
    h("nav", { "aria-label": "Your conversations" }, conversations.list, conversations.empty),
    conversations.more,
  );
  const toggle = h("button", { type: "button", class: "secondary sidebar-toggle", "aria-controls": "sidebar", "aria-expanded": "false" }, "Conversations");
  const title = h("h1", { class: "conv-title", id: "conv-title" }, "…");
  const rename = h("button", { type: "button", class: "secondary" }, "Rename");
  const pin = h("button", { type: "button", class: "secondary pin" }, "Pin");
  const remove = h("button", { type: "button", class: "secondary danger" }, "Delete");
  const turns = h("div", { class: "turns", role: "log", "aria-labelledby": "conv-title" });
  const textarea = h("textarea", { id: "message", rows: "2", placeholder: "Ask a question… (Enter sends, Shift+Enter adds a line)", "aria-label": "Message" });
  const send = h("button", { type: "submit", class: "primary" }, "Send");
  const stop = h("button", { type: "button", class: "danger", hidden: true }, "Stop");
  const formError = h("p", { class: "error", role: "alert", hidden: true });
  const attachments = attachmentsBar(() => state.session?.id, () => ensureSession(null));
  const composer = h(
    "form",
    { class: "composer", "aria-label": "Send a message" },
    scope.el,
    attachments.list,
    attachments.error,
    textarea,
    h("div", { class: "composer-actions" }, attachments.picker, h("span", { class: "grow" }), stop, send),
    formError,
  );
  const jump = h("button", { type: "button", class: "jump secondary", hidden: true }, "Jump to latest ↓");
  const conversation = h(
    "section",
    { class: "conversation", "aria-labelledby": "conv-title" },
    h("header", { class: "conv-head" }, toggle, title, h("div", { class: "conv-actions" }, pin, rename, remove)),
    turns,
    h("div", { class: "jump-wrap" }, jump),
    composer,
  );
  attachments.dropZone(conversation);
  trapFocus(sidebar, () => coversScreen(sidebar));
  mount(main, h("div", { class: "chat" }, sidebar, conversation, createPanel()));

  function showFormError(message) {
    formError.hidden = !message;
    formError.textContent = message || "";
  }

  // --- sidebar ---------------------------------------------------------------------------
  const loadSessions = (reset) => conversations.load(reset);
  newChat.addEventListener("click", () => {
    if (location.hash === "#/new") {
      textarea.focus();
      return;
    }
    location.hash = "#/new";
  });

  /** The conversation, stored now if it is a new chat (`title`: from its first question). */
  async function ensureSession(title) {
    if (state.session) return state.session.id;
    state.session = await api("/sessions", { method: "POST", body: title ? { title } : {} });
    sessionId = state.session.id;
    await scope.apply(sessionId); // the collections ticked in the new chat, before its first turn
    // Not a hash change: the page (and the answer that is about to stream) stays.
    history.replaceState(null, "", `#/c/${sessionId}`);
    showSession();
    loadSessions(true).catch(() => null);
    return sessionId;
  }

  function showSession() {
    const draft = !state.session;
    title.textContent = draft ? DRAFT_TITLE : state.session.title;
    document.title = `${title.textContent} — Threadline`;
    rename.hidden = draft;
    remove.hidden = draft;
    pin.hidden = draft;
    pin.textContent = state.session?.pinned ? "Unpin" : "Pin";
  }
  const showList = (open) => {
    sidebar.classList.toggle("open", open);
    toggle.setAttribute("aria-expanded", String(open));
    (open ? newChat : toggle).focus();
  };
  toggle.addEventListener("click", () => showList(!sidebar.classList.contains("open")));
  closeList.addEventListener("click", () => showList(false));

  // --- header: rename and delete -------------------------------------------------------------
  rename.addEventListener("click", () => {
    if (!title.isConnected) return; // already editing
    const input = h("input", { type: "text", value: state.session.title, "aria-label": "Conversation title", maxlength: "200" });
    let closed = false;
    // Closes the editor once, whichever of Enter, Esc or blur comes first. The title is put
    // back before the request, so removing the focused input (which fires blur) finds the
    // editor already closed, and nothing is replaced twice.
    const close = async (refocus) => {
      if (closed) return;
      closed = true;
      const value = input.value.trim();
      input.replaceWith(title);
      if (refocus) rename.focus(); // not on blur: the focus went where the user put it
      if (!value || value === state.session.title) return;
      title.textContent = value;
      try {
        state.session = await api(`/sessions/${sessionId}`, { method: "PATCH", body: { title: value } });
        await loadSessions(true);
      } catch (e) {
        showFormError(humanError(e));
      }
      title.textContent = state.session.title;
      document.title = `${state.session.title} — Threadline`;
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.isComposing) {
        // Not its default: the key would go on to press the Rename button that now has focus.
        event.preventDefault();
        close(true);
      } else if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        input.value = state.session.title;
        close(true);
      }
    });
    input.addEventListener("blur", () => close(false));
    title.replaceWith(input);
    input.focus();
    input.select();
  });
  // Pinned conversations are listed first, under "Pinned".
  pin.addEventListener("click", async () => {
    const pinned = !state.session.pinned;
    try {
      state.session = await api(`/sessions/${sessionId}`, { method: "PATCH", body: { pinned } });
      showSession();
      announce(pinned ? "Conversation pinned." : "Conversation unpinned.");
      await loadSessions(true);
    } catch (e) {
      showFormError(humanError(e));
    }
  });
  remove.addEventListener("click", async () => {
    if (remove.dataset.confirm !== "1") {
      remove.dataset.confirm = "1";
      remove.textContent = "Really delete?";
      setTimeout(() => {
        remove.dataset.confirm = "";
        remove.textContent = "Delete";
      }, 4000);
      return;
    }
    try {
      await api(`/sessions/${sessionId}`, { method: "DELETE" });
      announce("Conversation deleted.");
      location.hash = "#/";
    } catch (e) {
      showFormError(humanError(e));
    }
  });

  // --- the conversation -------------------------------------------------------------------
  // --- following the answer: the view stays at the end while it grows, unless the reader
  // scrolled up; then "Jump to latest" takes them back and the view follows again.
  let follow = true;
  const gap = () => turns.scrollHeight - turns.scrollTop - turns.clientHeight;
  const toEnd = () => {
    follow = true;
    jump.hidden = true;
    turns.scrollTop = turns.scrollHeight;
  };
  let lastTop = 0;
  turns.addEventListener(
    "scroll",
    () => {
      // Text that arrived since this event was queued may have grown the view: only a move
      // up (the reader's) stops following, and reaching the end starts it again.
      const top = turns.scrollTop;
      if (gap() < 48) follow = true;
      else if (top < lastTop) follow = false;
      lastTop = top;
      jump.hidden = follow;
    },
    { passive: true },
  );
  jump.addEventListener("click", () => {
    toEnd();
    textarea.focus();
  });
  // Runs after layout and before paint, whenever a turn's height changes (text arrived).
  const growth = new ResizeObserver(() => {
    if (follow) turns.scrollTop = turns.scrollHeight;
    else jump.hidden = false;
  });

  // --- the answers' actions that send a new turn (the old one stays above) ----------------
  const actions = {
    regenerate: (question) => sendMessage(question),
    resend: (question) => sendMessage(question),
    continueAnswer: () => sendMessage(CONTINUE_MESSAGE),
  };
  let lastView = null;

  function addTurn(turn) {
    const view = turnView(turn, actions);
    turns.append(view.el);
    growth.observe(view.el);
    lastView?.setLast(false);
    lastView = view;
    view.setLast(true);
    toEnd();
    return view;
  }

  // --- older turns: the conversation opens at its end; scrolling near the top (or the
  // button, for the keyboard) loads the page before, kept in place above what was read.
  let olderCursor = null;
  let loadingOlder = null;
  const feedbackOf = new Map(); // turn id -> the thumb given (GET /sessions/{id}/feedback)
  const withFeedback = (turn) => Object.assign(turn, { feedback: feedbackOf.get(turn.id) || null });
  const older = h("button", { type: "button", class: "secondary older", hidden: true }, "Load older turns");
  older.addEventListener("click", () => loadOlder());
  turns.addEventListener("scroll", () => {
    if (turns.scrollTop < NEAR_TOP_PX) loadOlder();
  }, { passive: true });

  function loadOlder() {
    if (!olderCursor || loadingOlder) return loadingOlder;
    loadingOlder = (async () => {
      try {
        const query = new URLSearchParams({ limit: String(TURNS_PAGE), cursor: olderCursor });
        const page = await api(`/sessions/${sessionId}/turns?${query}`);
        const fromEnd = turns.scrollHeight - turns.scrollTop;
        const views = [...page.items].reverse().map((turn) => turnView(withFeedback(turn)).el);
        older.after(...views);
        turns.scrollTop = turns.scrollHeight - fromEnd; // the turn read stays where it was
        olderCursor = page.next_cursor;
        older.hidden = !olderCursor;
        announce(`${views.length} older turns loaded.`);
      } catch (e) {
        showFormError(humanError(e));
      } finally {
        loadingOlder = null;
      }
    })();
    return loadingOlder;
  }

  function setStreaming(streaming) {
    state.streaming = streaming;
    stop.hidden = !streaming;
    send.disabled = Boolean(streaming);
  }

  async function run(view, body, turnId) {
    const controller = new AbortController();
    const streaming = { view, turnId, stopRequested: false, controller, deadline: null };
    setStreaming(streaming);
    let text = "";
    try {
      const terminal = await streamTurn({
        body,
        key: newKey(),
        turnId,
        signal: controller.signal,
        onTurnId(id) {
          streaming.turnId = id;
          view.setId(id);
          if (streaming.stopRequested) stopTurn(id).catch(() => null);
        },
        onReconnect() {
          view.note("Connection lost — resuming…");
          streaming.resuming = true;
        },
        onEvent(event) {
          if (controller.signal.aborted) return;
          if (streaming.resuming) {
            streaming.resuming = false;
            view.note("Answering…");
          }
          if (event.name === "token") {
            text += event.data.text;
            view.setText(text);
          } else if (event.name === "meta") {
            view.turn.query_composition = event.data.query_composition;
            if (view.turn.status === "pending") view.note("Answering…");
          } else if (event.name === "sources") {
            view.setSources(event.data.sources || []);
          } else if (event.name === "done") {
            view.el.streamedText = text; // what the tokens said, before done replaces it (bench/web.py)
            view.finish(event.data);
          } else if (event.name === "error") {
            view.fail(humanError(new ApiError(event.data.status || 0, event.data.code, event.data.message)));
          }
        },
      });
      if (terminal.name === "done") announce(`Answer: ${terminal.data.answer}`);
      else announce("The answer failed.");
    } catch (e) {
      if (controller.signal.aborted) {
        view.stoppedHere();
        announce("Stopped.");
        // Nothing came back at all: give the question back, to send again later.
        if (!streaming.turnId && !text && body && !textarea.value) textarea.value = body.message;
      } else {
        view.fail(humanError(e));
        announce(humanError(e));
      }
    } finally {
      clearTimeout(streaming.deadline);
      setStreaming(null);
    }
  }

  function submit(event) {
    event?.preventDefault();
    const message = textarea.value.trim();
    if (sendMessage(message)) textarea.value = "";
  }

  /** Send `message` as a new turn; false (nothing sent) while another answer streams. */
  function sendMessage(message) {
    if (!message || state.streaming || state.asking) return false;
    state.asking = true; // until the stream starts: a new chat is stored first
    ask(message).finally(() => {
      state.asking = false;
    });
    return true;
  }

  async function ask(message) {
    showFormError("");
    turns.querySelector(".welcome")?.remove();
    const view = addTurn({ id: null, user_query: message, answer: "", status: "pending" });
    if (!state.session) {
      try {
        await ensureSession(titleOf(message));
      } catch (e) {
        view.fail(humanError(e));
        textarea.value = message;
        return;
      }
    } else if (state.session.title === DEFAULT_TITLE) {
      api(`/sessions/${sessionId}`, { method: "PATCH", body: { title: titleOf(message) } })
        .then((updated) => {
          state.session = updated;
          title.textContent = updated.title;
          return loadSessions(true);
        })
        .catch(() => null);
    }
    const running = run(view, { session_id: sessionId, message });
    state.asking = false;
    await running;
    textarea.focus();
  }
  composer.addEventListener("submit", submit);
  textarea.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) submit(event);
  });
  stop.addEventListener("click", () => active?.stop());

  active = {
    closeList() {
      if (!sidebar.classList.contains("open")) return false;
      showList(false);
      return true;
    },
    stop() {
      const streaming = state.streaming;
      if (!streaming || streaming.stopRequested) return false;
      streaming.stopRequested = true;
      streaming.view.note("Stopping…");
      // The server is asked to stop (its `done` keeps the partial answer); if it has not ended
      // the stream within the grace, or cannot be reached at all, the page lets go itself.
      if (streaming.turnId) stopTurn(streaming.turnId).catch(() => null);
      const grace = navigator.onLine ? STOP_GRACE_MS : 0;
      streaming.deadline = setTimeout(() => streaming.controller.abort(), grace);
      return true;
    },
  };

  if (!sessionId) {
    showSession();
    const intro = welcome((question) => {
      textarea.value = question;
      submit();
    });
    turns.append(intro.el);
    textarea.focus();
    await Promise.all([loadSessions(true), intro.load(), scope.load()]);
    return;
  }
  try {
    state.session = await api(`/sessions/${sessionId}`);
  } catch (e) {
    mount(conversation, errorBox(e instanceof ApiError && e.status === 404 ? "This conversation does not exist (or is not yours)." : humanError(e)));
    loadSessions(true).catch(() => null);
    return;
  }
  showSession();
  await Promise.all([loadSessions(true), attachments.load(), loadTurns(), scope.load(state.session)]);
  textarea.focus();

  async function loadTurns() {
    const [page, given] = await Promise.all([
      api(`/sessions/${sessionId}/turns?limit=${TURNS_PAGE}`),
      api(`/sessions/${sessionId}/feedback`).catch(() => ({ items: [] })), // thumbs are extra
    ]);
    for (const item of given.items) feedbackOf.set(item.turn_id, item);
    const ordered = [...page.items].reverse().map(withFeedback);
    olderCursor = page.next_cursor;
    older.hidden = !olderCursor;
    turns.append(older);
    for (const turn of ordered) addTurn(turn);
    const last = ordered[ordered.length - 1];
    if (last && last.status === "pending") {
      // Still running (or its process died): follow it to its end from the first event.
      const view = turns.lastElementChild && addTurnView(last);
      run(view, null, last.id);
    }
    // Too few turns to scroll: fill the view from the older pages.
    while (olderCursor && turns.scrollHeight <= turns.clientHeight) {
      const before = olderCursor;
      await loadOlder();
      if (olderCursor === before) break; // failed: the button stays
      toEnd();
    }
  }

  function addTurnView(turn) {
    turns.lastElementChild.remove();
    turn.answer = "";
    return addTurn(turn);
  }
}

/** A new chat's opening: what the knowledge base covers and three questions drawn from it
 * (`GET /kb/overview`: its newest documents' titles and headings; no model involved). */
function welcome(ask) {
  const el = h("section", { class: "welcome", "aria-labelledby": "welcome-title" }, h("h2", { id: "welcome-title" }, "What can I ask?"));
  async function load() {
    let overview;
    try {
      overview = await api("/kb/overview");
    } catch {
      return; // the chat works without it
    }
    if (!overview.documents) {
      el.append(h("p", {}, "The knowledge base is empty so far: ask about the documents you attach, or anything at all."));
      return;
    }
    const count = countOf(overview.documents, "document");
    el.append(h("p", {}, `Answers come from the knowledge base, ${count}${overview.documents > overview.topics.length ? ", the newest" : ""}:`));
    const topics = h("ul", { class: "topics" });
    for (const topic of overview.topics) {
      topics.append(h("li", {}, h("strong", {}, topic.title), topic.headings.length ? ` — ${topic.headings.join(", ")}` : ""));
    }
    el.append(topics);
    if (overview.suggestions.length) {
      const list = h("ul", { class: "suggestions", "aria-label": "Suggested questions" });
      for (const question of overview.suggestions) {
        const button = h("button", { type: "button", class: "secondary" }, question);
        button.addEventListener("click", () => ask(question));
        list.append(h("li", {}, button));
      }
      el.append(h("h3", {}, "Try asking"), list);
    }
  }
  return { el, load };
}

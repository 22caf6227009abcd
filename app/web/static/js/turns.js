// One turn of the conversation on screen: the question, the answer as safe Markdown with
// numbered citations, its status, and its actions: copy the answer (as Markdown), its
// sources, how it was built; on the last turn only, regenerate, edit the question and send
// it again, and continue after Stop (`actions`, given by the chat page, sends each); and
// thumbs up or down with an optional comment (feedback.js) on every recorded answer.

import { h } from "./dom.js";
import { feedbackView } from "./feedback.js";
import { copyText, highlightCode, liveMarkdown, setMarkdown } from "./markdown.js";
import { splitSources } from "./sources.js";

// The panels' views load when a panel first opens (kept off the chat page's first load).
const openSources = (...args) => import("./panels.js").then((views) => views.openSources(...args));
const openBuild = (...args) => import("./panels.js").then((views) => views.openBuild(...args));

const STATUS = {
  incomplete: "Incomplete answer (stopped or cut off)",
  failed: "This answer failed",
  pending: "Answering…",
};

/** `actions`: `regenerate(question)`, `resend(question)` (edited), `continueAnswer()`; each
 * sends a new turn and says whether it could (not while another answer streams). */
export function turnView(turn, actions = null) {
  const answer = h("div", { class: "answer markdown" });
  const status = h("p", { class: "status", hidden: true });
  const copyButton = h("button", { type: "button", class: "link copy-answer", hidden: true }, "Copy");
  const sourcesButton = h("button", { type: "button", class: "link", hidden: true }, "Sources");
  const buildButton = h("button", { type: "button", class: "link", hidden: true }, "How this answer was built");
  const regenerateButton = h("button", { type: "button", class: "link regenerate", hidden: true }, "Regenerate");
  const continueButton = h("button", { type: "button", class: "link continue", hidden: true }, "Continue");
  const editButton = h("button", { type: "button", class: "link edit", hidden: true, "aria-label": "Edit the question" }, "Edit");
  const feedback = feedbackView(turn);
  feedback.el.hidden = true;
  const questionText = h("span", { class: "question-text" }, turn.user_query);
  const question = h("div", { class: "question" }, h("span", { class: "sr-only" }, "You asked: "), questionText);
  const el = h(
    "article",
    { class: "turn", "data-turn-id": turn.id || "" },
    question,
    editButton,
    h(
      "div",
      { class: "reply" },
      answer,
      status,
      h("div", { class: "turn-actions" }, sourcesButton, buildButton, copyButton, continueButton, regenerateButton),
      feedback.el,
    ),
  );
  let pending = null;
  let last = false; // the conversation's last turn: the one regenerate, edit and continue act on
  let editing = null; // the open editor's close(refocus)

  copyButton.addEventListener("click", () => copyText(turn.answer, copyButton, "Copy"));
  regenerateButton.addEventListener("click", () => actions?.regenerate(turn.user_query));
  continueButton.addEventListener("click", () => actions?.continueAnswer());
  editButton.addEventListener("click", () => edit());

  /** The question in place as a text box: Enter sends it as a new turn, Esc puts it back. */
  function edit() {
    const box = h("textarea", { rows: "2", "aria-label": "Edit the question" });
    box.value = turn.user_query;
    const sendEdit = h("button", { type: "submit", class: "primary" }, "Send");
    const cancel = h("button", { type: "button", class: "secondary" }, "Cancel");
    const form = h("form", { class: "edit-question", "aria-label": "Edit the question" }, box, h("div", { class: "edit-actions" }, cancel, sendEdit));
    const close = (refocus = true) => {
      if (editing !== close) return; // already closed (sending it made a newer turn)
      form.replaceWith(question);
      editing = null;
      setActions();
      if (refocus) editButton.focus();
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = box.value.trim();
      if (!text) return;
      if (text === turn.user_query.trim() || actions?.resend(text)) close();
    });
    box.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      } else if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        close();
      }
    });
    cancel.addEventListener("click", () => close());
    question.replaceWith(form);
    editing = close;
    setActions();
    box.focus();
    box.setSelectionRange(box.value.length, box.value.length);
  }

  answer.addEventListener("click", (event) => {
    const cite = event.target.closest(".cite");
    if (cite) openSources(turn, Number(cite.dataset.cite), cite);
  });
  sourcesButton.addEventListener("click", () => openSources(turn, 0, sourcesButton));
  buildButton.addEventListener("click", () => openBuild(turn, buildButton));

  // While it streams, only the answer's unfinished last block is rendered again on each frame
  // (a 27k-character answer rendered whole every frame made tasks of 100+ ms).
  const live = liveMarkdown(answer, { citations: true });
  let streamed = null; // the text the live view shows, while there is one
  const render = () => {
    pending = null;
    if (turn.status === "pending") {
      live.update(turn.answer);
      streamed = turn.answer;
    } else if (streamed !== null && turn.answer.startsWith(streamed)) {
      // The final text goes on from what streamed: only its end is rendered; code is
      // coloured once, now.
      live.update(turn.answer);
      streamed = turn.answer;
      highlightCode(answer);
    } else {
      live.reset();
      streamed = null;
      setMarkdown(answer, turn.answer, { citations: true, highlight: true });
    }
  };

  function setStatus() {
    const text = STATUS[turn.status];
    status.hidden = !text;
    status.textContent = text || "";
    status.className = `status ${turn.status}`;
    el.dataset.status = turn.status;
  }

  function setActions() {
    // Once the answer is recorded, the button counts what it cited; an answer that cites
    // nothing and came from no model ("I found nothing…") offers no sources at all.
    const { cited, all } = splitSources(turn);
    const meta = turn.context_metadata || {};
    const settled = Array.isArray(meta.citations?.cited);
    const route = (turn.triage || meta.triage || {}).route;
    const noModel = (turn.model || meta.model) === "extractive" || ["faq", "smalltalk", "off_topic"].includes(route);
    let label = null;
    if (!all.length) label = null;
    else if (!settled) label = `Sources (${all.length})`;
    else if (cited.length) label = `Sources (${cited.length})`;
    else if (!noModel) label = `Retrieved (${all.length}), none cited`;
    sourcesButton.hidden = !label;
    sourcesButton.textContent = label || "Sources";
    buildButton.hidden = !turn.context_metadata || !Object.keys(turn.context_metadata).length;
    const settledTurn = turn.status !== "pending";
    copyButton.hidden = !settledTurn || !turn.answer;
    // An answer that was recorded (it has an id, and is no longer running) can be judged.
    feedback.el.hidden = !settledTurn || !turn.id || !turn.answer || turn.status === "failed";
    const mine = Boolean(actions) && last && settledTurn;
    regenerateButton.hidden = !mine;
    editButton.hidden = !mine || Boolean(editing);
    continueButton.hidden = !mine || turn.status !== "incomplete" || !turn.answer;
  }

  render();
  setStatus();
  setActions();

  return {
    el,
    turn,
    /** Whether this is the conversation's last turn (its actions show then only). */
    setLast(value) {
      last = value;
      if (!last && editing) editing(false); // a newer turn came: this question is no longer the last
      setActions();
    },
    /** Streamed text so far; rendered at most once per frame. */
    setText(text) {
      turn.answer = text;
      if (!pending) pending = requestAnimationFrame(render);
    },
    setId(id) {
      turn.id = id;
      el.dataset.turnId = id;
    },
    note(text) {
      status.hidden = false;
      status.textContent = text;
    },
    /** The `done` event: its `answer` replaces the streamed text. */
    finish(done) {
      if (pending) cancelAnimationFrame(pending);
      Object.assign(turn, {
        answer: done.answer ?? turn.answer,
        status: done.status,
        context_metadata: done.context_metadata || {},
        triage: done.triage,
        model: done.model,
        validation: done.validation,
        query_composition: done.query_composition || turn.query_composition,
      });
      render();
      setStatus();
      if (done.stopped) status.textContent = "Stopped — the answer is incomplete";
      setActions();
    },
    /** Stopped on this side (the server did not confirm in time): the text shown so far stays. */
    stoppedHere() {
      if (pending) cancelAnimationFrame(pending);
      render();
      turn.status = "incomplete";
      setStatus();
      status.textContent = turn.id
        ? "Stopped — the answer is incomplete"
        : "Stopped — the server could not be reached; the answer is incomplete";
      setActions();
    },
    fail(message) {
      if (pending) cancelAnimationFrame(pending);
      render();
      turn.status = "failed";
      setStatus();
      status.textContent = message;
      status.setAttribute("role", "alert");
      setActions();
    },
    setSources(sources) {
      turn.sources = sources;
      setActions();
    },
  };
}

// Thumbs up or down on an answer, with an optional comment (`POST /chat/{turn}/feedback`;
// the same thumb again takes it back, `DELETE`). Stored per turn, so the admin audit reads
// it and the owner's export holds it.

import { api, humanError } from "./api.js";
import { h } from "./dom.js";
import { thumbIcon } from "./icons.js";

const COMMENT_MAX = 2000;

/** The thumbs of `turn` (its `feedback`, `{value, comment}` or null, is kept up to date). */
export function feedbackView(turn) {
  const up = h("button", { type: "button", class: "thumb up", "aria-pressed": "false", "aria-label": "Good answer", title: "Good answer" }, thumbIcon("up"));
  const down = h("button", { type: "button", class: "thumb down", "aria-pressed": "false", "aria-label": "Bad answer", title: "Bad answer" }, thumbIcon("down"));
  const note = h("span", { class: "feedback-note muted", role: "status" });
  const box = h("textarea", { rows: "2", maxlength: String(COMMENT_MAX), "aria-label": "What was good or wrong? (optional)", placeholder: "What was good or wrong? (optional)" });
  const save = h("button", { type: "submit", class: "primary" }, "Send feedback");
  const skip = h("button", { type: "button", class: "secondary" }, "Skip");
  const form = h("form", { class: "feedback-comment", hidden: true, "aria-label": "Comment on the answer" }, box, h("div", { class: "edit-actions" }, skip, save));
  const el = h("div", { class: "feedback" }, h("span", { class: "thumbs", role: "group", "aria-label": "Rate this answer" }, up, down), note, form);
  let busy = false;

  function show() {
    const value = turn.feedback?.value || null;
    up.setAttribute("aria-pressed", String(value === "up"));
    down.setAttribute("aria-pressed", String(value === "down"));
  }

  async function send(value, comment) {
    if (busy || !turn.id) return false;
    busy = true;
    try {
      if (value === null) {
        await api(`/chat/${turn.id}/feedback`, { method: "DELETE" });
        turn.feedback = null;
      } else {
        const body = comment ? { value, comment } : { value };
        turn.feedback = await api(`/chat/${turn.id}/feedback`, { method: "POST", body });
      }
      show();
      return true;
    } catch (error) {
      note.className = "feedback-note error";
      note.textContent = humanError(error);
      return false;
    } finally {
      busy = false;
    }
  }

  async function thumb(value) {
    const again = turn.feedback?.value === value;
    // Another thumb is a new judgement: the comment written for the old one goes with it.
    if (!(await send(again ? null : value, null))) return;
    note.className = "feedback-note muted";
    note.textContent = again ? "Feedback removed." : "Thanks — noted.";
    form.hidden = again;
    if (!again) {
      box.value = "";
      box.focus();
    }
  }
  up.addEventListener("click", () => thumb("up"));
  down.addEventListener("click", () => thumb("down"));
  const close = () => {
    form.hidden = true;
    (turn.feedback?.value === "down" ? down : up).focus();
  };
  skip.addEventListener("click", close);
  box.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      close();
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!turn.feedback) return;
    if (await send(turn.feedback.value, box.value.trim() || null)) {
      note.textContent = turn.feedback.comment ? "Thanks — your comment is saved." : "Thanks — noted.";
      close();
    }
  });
  show();
  return { el, show };
}

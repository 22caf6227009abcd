// The audit: turns with every filter of /admin/audit/turns and cursor paging, one turn in
// full with its context manifest, and the append-only log of admin reads and erasures.

import { api } from "../api.js";
import { h, mount } from "../dom.js";
import { thumbIcon } from "../icons.js";
import { setMarkdown } from "../markdown.js";
import { frame, pager, statusLine, table, tag, when } from "./common.js";

function field(id, label, input) {
  input.id = id;
  return h("div", {}, h("label", { for: id }, label), input);
}

function short(id) {
  return id ? h("code", { title: id }, id.slice(0, 8)) : "—";
}

/** A turn's feedback as its thumb (and its comment, when there is one), or "—". */
function thumbOf(feedback) {
  if (!feedback) return "—";
  const thumb = h("span", { class: `tag feedback-tag ${feedback.value}` }, thumbIcon(feedback.value), feedback.value === "up" ? "thumbs up" : "thumbs down");
  return feedback.comment ? [thumb, " ", h("span", { class: "feedback-comment-text" }, feedback.comment)] : thumb;
}

function isoOf(value) {
  return value ? new Date(value).toISOString() : "";
}

async function turns(main) {
  const status = statusLine();
  const inputs = {
    user_id: h("input", { type: "text", placeholder: "uuid" }),
    session_id: h("input", { type: "text", placeholder: "uuid" }),
    since: h("input", { type: "datetime-local" }),
    until: h("input", { type: "datetime-local" }),
    composition: h("select", {}, ["", "pure_kb", "pure_doc", "hybrid", "chat"].map((c) => h("option", { value: c }, c || "any"))),
    min_quality: h("input", { type: "number", min: "0", max: "1", step: "0.05" }),
    max_quality: h("input", { type: "number", min: "0", max: "1", step: "0.05" }),
    truncated: h("select", {}, h("option", { value: "" }, "any"), h("option", { value: "true" }, "yes"), h("option", { value: "false" }, "no")),
    feedback: h("select", {}, h("option", { value: "" }, "—"), h("option", { value: "any" }, "any thumb"), h("option", { value: "up" }, "thumbs up"), h("option", { value: "down" }, "thumbs down")),
  };
  const labels = { user_id: "User id", session_id: "Session id", since: "Since", until: "Until", composition: "Composition", min_quality: "Min quality", max_quality: "Max quality", truncated: "Truncated", feedback: "Feedback" };
  const form = h("form", { class: "card filters", role: "search", "aria-label": "Filter turns" }, h("div", { class: "row" }, Object.entries(inputs).map(([key, input]) => field(`f-${key}`, labels[key], input)), h("button", { type: "submit", class: "primary" }, "Filter")));
  const list = h("div");
  const query = () => {
    const params = new URLSearchParams({ limit: "20" });
    for (const [key, input] of Object.entries(inputs)) {
      const value = key === "since" || key === "until" ? isoOf(input.value) : input.value.trim();
      if (value) params.set(key, value);
    }
    return params;
  };
  const paging = pager(
    (cursor) => {
      const params = query();
      if (cursor) params.set("cursor", cursor);
      return api(`/admin/audit/turns?${params}`);
    },
    (items) =>
      mount(
        list,
        table(
          [
            ["When", (t) => when(t.created_at)],
            ["User", (t) => short(t.user_id)],
            ["Session", (t) => short(t.session_id)],
            ["Status", (t) => tag(t.status)],
            ["Composition", (t) => t.query_composition || "—"],
            ["Quality", (t) => (typeof t.context_metadata.quality_score === "number" ? t.context_metadata.quality_score.toFixed(2) : "—")],
            ["Truncated", (t) => (t.context_metadata.truncation_applied ? "yes" : "no")],
            ["Feedback", (t) => thumbOf(t.feedback)],
            ["", (t) => h("a", { href: `#/admin/audit/${t.turn_id}` }, "Open")],
          ],
          items,
          "No turn matches.",
        ),
      ),
    status,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    paging.reset();
  });
  frame(main, "Audit", h("p", { class: "muted" }, "Opening a turn is itself recorded in the audit log."), form, status.el, h("section", { class: "card" }, list, paging.el));
  await paging.reset();
}

async function oneTurn(main, turnId) {
  const turn = await api(`/admin/audit/turns/${turnId}`);
  const answer = h("div", { class: "markdown reply" });
  setMarkdown(answer, turn.answer, { citations: false });
  const rows = [
    ["Turn", h("code", {}, turn.turn_id)],
    ["When", when(turn.created_at)],
    ["User", h("code", {}, turn.user_id)],
    ["Session", h("code", {}, turn.session_id)],
    ["Status", tag(turn.status)],
    ["Composition", turn.query_composition || "—"],
    ["Model", turn.model || "—"],
    ["Tokens", `${turn.prompt_tokens} prompt + ${turn.completion_tokens} completion`],
    ["Latency", turn.latency_ms === null ? "—" : `${turn.latency_ms} ms`],
    ["Attachments", turn.attachment_ids.length ? turn.attachment_ids.join(", ") : "none"],
    ["Feedback", thumbOf(turn.feedback)],
  ];
  frame(
    main,
    "Audit: one turn",
    h("p", {}, h("a", { href: "#/admin/audit" }, "← All turns")),
    h("section", { class: "card build" }, h("dl", {}, rows.map(([label, value]) => [h("dt", {}, label), h("dd", {}, value)]))),
    h("section", { class: "card" }, h("h2", {}, "Question"), h("p", { class: "question-text" }, turn.user_query), h("h2", {}, "Answer"), answer),
    h("section", { class: "card" }, h("h2", {}, "Context manifest"), h("pre", { class: "json" }, JSON.stringify(turn.context_metadata, null, 2))),
  );
}

async function log(main) {
  const status = statusLine();
  const inputs = {
    actor_user_id: h("input", { type: "text", placeholder: "uuid" }),
    target_user_id: h("input", { type: "text", placeholder: "uuid" }),
    action: h("input", { type: "text", placeholder: "e.g. audit.turn.read" }),
  };
  const labels = { actor_user_id: "Actor", target_user_id: "Target user", action: "Action" };
  const form = h("form", { class: "card filters", role: "search", "aria-label": "Filter the log" }, h("div", { class: "row" }, Object.entries(inputs).map(([key, input]) => field(`l-${key}`, labels[key], input)), h("button", { type: "submit", class: "primary" }, "Filter")));
  const list = h("div");
  const paging = pager(
    (cursor) => {
      const params = new URLSearchParams({ limit: "20" });
      for (const [key, input] of Object.entries(inputs)) if (input.value.trim()) params.set(key, input.value.trim());
      if (cursor) params.set("cursor", cursor);
      return api(`/admin/audit/log?${params}`);
    },
    (items) =>
      mount(
        list,
        table(
          [
            ["When", (e) => when(e.created_at)],
            ["Actor", (e) => short(e.actor_user_id)],
            ["Action", (e) => h("code", {}, e.action)],
            ["Target", (e) => short(e.target_user_id)],
            ["Resource", (e) => e.resource || "—"],
            ["Details", (e) => h("code", { class: "details" }, JSON.stringify(e.details))],
          ],
          items,
          "The log is empty.",
        ),
      ),
    status,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    paging.reset();
  });
  frame(main, "Audit log", h("p", { class: "muted" }, "Append-only: every admin read of turns and every erasure."), form, status.el, h("section", { class: "card" }, list, paging.el));
  await paging.reset();
}

export async function render(main, key, rest) {
  if (key === "log") return log(main);
  if (rest.length) return oneTurn(main, rest[0]);
  return turns(main);
}

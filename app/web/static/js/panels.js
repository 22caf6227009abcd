// The side panel of the chat page: a turn's numbered sources, or how its answer was built
// (composition, token budget by source kind, history, truncations, quality, triage,
// validation) from the turn's context metadata.

import { h, mount } from "./dom.js";
import { setMarkdown } from "./markdown.js";

const KIND = { kb: "Knowledge base document", attachment: "Attachment", faq: "FAQ entry" };

let panel = null;

export function createPanel() {
  panel = h("aside", { class: "panel", id: "panel", hidden: true, "aria-labelledby": "panel-title" });
  return panel;
}

export function closePanel() {
  if (!panel || panel.hidden) return false;
  panel.hidden = true;
  panel.returnFocus?.focus();
  return true;
}

function open(title, body, returnFocus) {
  const close = h("button", { type: "button", class: "icon", "aria-label": "Close panel", onclick: closePanel }, "✕");
  mount(panel, h("header", {}, h("h2", { id: "panel-title", tabindex: "-1" }, title), close), body);
  panel.returnFocus = returnFocus;
  panel.hidden = false;
  panel.querySelector("h2").focus();
}

function score(value) {
  return typeof value === "number" ? value.toFixed(3) : "—";
}

/** The sources of a turn, the `n`th highlighted. */
export function openSources(turn, n, returnFocus) {
  const sources = turn.sources || [];
  let items;
  if (sources.length) {
    items = sources.map((source) => {
      const snippet = h("div", { class: "snippet" });
      setMarkdown(snippet, source.snippet || "");
      return h(
        "li",
        { class: source.n === n ? "source current" : "source", id: `source-${turn.id}-${source.n}` },
        h("p", { class: "source-head" }, h("span", { class: "num" }, String(source.n)), h("strong", {}, source.title || "Untitled")),
        h("p", { class: "meta" }, `${KIND[source.kind] || source.kind} · score ${score(source.score)}`, source.cited ? " · cited" : ""),
        snippet,
      );
    });
  } else {
    // A stored turn keeps which sources it used, not their text.
    const used = (turn.context_metadata && turn.context_metadata.sources) || [];
    items = used.map((source, i) =>
      h(
        "li",
        { class: i + 1 === n ? "source current" : "source" },
        h("p", { class: "source-head" }, h("span", { class: "num" }, String(i + 1)), h("strong", {}, KIND[source.kind] || source.kind)),
        h("p", { class: "meta" }, `score ${score(source.score)} · ${source.tokens ?? "?"} tokens`),
      ),
    );
    if (!items.length) items = [h("li", {}, "This answer used no sources.")];
  }
  open("Sources", h("ol", { class: "sources" }, items), returnFocus);
  panel.querySelector(".source.current")?.scrollIntoView({ block: "nearest" });
}

function row(label, value) {
  return [h("dt", {}, label), h("dd", {}, value ?? "—")];
}

function budgetBar(distribution, budget) {
  const parts = [
    ["history", "History"],
    ["kb", "Knowledge base"],
    ["attachment", "Attachments"],
  ];
  const total = Math.max(budget || 0, parts.reduce((sum, [k]) => sum + (distribution[k] || 0), 0), 1);
  const bar = h("div", { class: "budget-bar", role: "img", "aria-label": "Token budget by source kind" });
  const legend = h("ul", { class: "legend" });
  for (const [key, label] of parts) {
    const tokens = distribution[key] || 0;
    const segment = h("span", { class: `seg ${key}` });
    segment.style.width = `${(100 * tokens) / total}%`; // CSSOM, allowed by the CSP
    bar.append(segment);
    legend.append(h("li", {}, h("span", { class: `swatch ${key}` }), `${label}: ${tokens} tokens`));
  }
  return [bar, legend];
}

function issues(values) {
  if (!values || !values.length) return null;
  const clip = (v) => {
    const text = typeof v === "string" ? v : JSON.stringify(v);
    return text.length > 140 ? `${text.slice(0, 137)}…` : text;
  };
  return h("ul", {}, values.slice(0, 5).map((v) => h("li", {}, clip(v))));
}

function listOrNone(values) {
  if (!values || !values.length) return "none";
  return values.map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join(", ");
}

/** The queries retrieval searched with (ADR 0034): each one's name, weight and text; for the
 * sources the previous answer cited, how many. */
function searchedWith(retrieval) {
  const queries = (retrieval && retrieval.queries) || [];
  if (!queries.length) return null;
  const what = (q) => (q.name === "cited" ? `${(q.chunks || []).length} source(s) the last answer cited` : q.text);
  return h("ul", {}, queries.map((q) => h("li", {}, `${q.name} (weight ${q.weight}): ${what(q)}`)));
}

/** How a turn's answer was built, from its context metadata (and triage and validation). */
export function openBuild(turn, returnFocus) {
  const meta = turn.context_metadata || {};
  const triage = turn.triage || meta.triage || {};
  const validation = turn.validation || meta.validation || {};
  const grounding = validation.sources || {};
  const guard = validation.output_guardrail || {};
  const distribution = meta.source_distribution || {};
  const body = h(
    "div",
    { class: "build" },
    h(
      "dl",
      {},
      row("Composition", turn.query_composition || meta.composition),
      row("Triage route", triage.route),
      row("Searched with", searchedWith(meta.retrieval)),
      row("Tokens used", meta.token_count !== undefined ? `${meta.token_count} of ${meta.token_budget ?? "?"}` : null),
      row("History turns included", meta.history_turns_included !== undefined ? `${meta.history_turns_included}${meta.summary_included ? " + summary" : ""}` : null),
      row("Truncated", meta.truncation_applied ? `yes — truncated: ${listOrNone(meta.truncated)}; dropped: ${listOrNone(meta.dropped)}` : "no"),
      row("Quality score", typeof meta.quality_score === "number" ? meta.quality_score.toFixed(2) : null),
      row(
        "Grounding",
        grounding.grounded === undefined
          ? null
          : [
              `${grounding.grounded ? "grounded" : "not grounded"}${typeof grounding.confidence === "number" ? ` (confidence ${grounding.confidence.toFixed(2)})` : ""}`,
              issues(grounding.issues),
            ],
      ),
      row("Output guardrail", guard.safe === undefined ? null : guard.safe ? "passed" : ["flagged", issues(guard.issues)]),
    ),
    h("h3", {}, "Token budget by source kind"),
    budgetBar(distribution, meta.token_budget),
  );
  open("How this answer was built", body, returnFocus);
}

// The side panel of the chat page: a turn's numbered sources, or how its answer was built
// (composition, token budget by source kind, history, truncations, quality, triage,
// validation) from the turn's context metadata.

import { countOf, h } from "./dom.js";
import { setMarkdown } from "./markdown.js";
import { originalButton } from "./originals.js";
import { open } from "./panel.js";
import { splitSources, turnSources } from "./sources.js";

const KIND = { kb: "Knowledge base document", attachment: "Attachment", faq: "FAQ entry" };

const FILE_NAME = /^[\w.-]+\.(md|markdown|txt|pdf|docx?|html?|rst|csv|json)$/i;
const HEADING = /^\s*#{1,6}\s+(.+?)\s*#*\s*$/;

/** The title people gave a document: a file name's first heading, else its name in words. */
export function sourceTitle(source) {
  const title = String(source.title || "").trim();
  if (!title) return "Untitled";
  if (!FILE_NAME.test(title)) return title;
  const heading = HEADING.exec(String(source.snippet || "").split("\n", 1)[0]);
  if (heading) return heading[1];
  const words = title.replace(/\.[^.]+$/, "").replace(/[-_.]+/g, " ").trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** A readable snippet: no heading line that only repeats the title, cut at a word's end. */
export function readableSnippet(source) {
  let text = String(source.snippet || "");
  const [first, ...rest] = text.split("\n");
  if (HEADING.test(first)) text = rest.join("\n");
  text = text.trim();
  if (text.endsWith("…")) {
    const cut = text.slice(0, -1).replace(/\s+\S*$/, "");
    text = `${cut.replace(/[\s,;:.-]+$/, "")} …`;
  }
  return text;
}

/** Where a passage is in its document, as a reader cites it ("p. 12–13 · 3 Refunds › 3.2"). */
export function locationText(location) {
  const where = location || {};
  const parts = [];
  if (where.chapter) parts.push(`chapter ${where.chapter}`);
  if (where.page) parts.push(where.page_end ? `p. ${where.page}–${where.page_end}` : `p. ${where.page}`);
  if (where.slide) parts.push(`slide ${where.slide}`);
  if (where.sheet) parts.push(where.rows ? `sheet ${where.sheet}, rows ${where.rows}` : `sheet ${where.sheet}`);
  else if (where.rows) parts.push(`rows ${where.rows}`);
  if (where.section) parts.push(where.section);
  return parts.join(" · ");
}

/** Relevance as a rank among the turn's sources and a bar (scores are only comparable within
 * one search, and a reranker's are often negative). */
function relevance(source, ranked) {
  const rank = ranked.indexOf(source) + 1;
  const scores = ranked.map((s) => Number(s.score) || 0);
  const [top, low] = [Math.max(...scores), Math.min(...scores)];
  const share = top === low ? 1 : 0.15 + (0.85 * ((Number(source.score) || 0) - low)) / (top - low);
  const fill = h("span", { class: "fill" });
  fill.style.width = `${Math.round(100 * share)}%`; // CSSOM, allowed by the CSP
  return h(
    "span",
    { class: "relevance", role: "img", "aria-label": `Relevance: rank ${rank} of ${ranked.length}` },
    h("span", { class: "bar" }, fill),
    h("span", { class: "rank", "aria-hidden": "true" }, `#${rank} of ${ranked.length}`),
  );
}

function sourceItem(turn, source, n, ranked) {
  const snippet = h("div", { class: "snippet" });
  setMarkdown(snippet, readableSnippet(source));
  const title = sourceTitle(source);
  const raw = String(source.title || "");
  const where = locationText(source.location);
  return h(
    "li",
    { class: source.n === n ? "source current" : "source", id: `source-${turn.id}-${source.n}` },
    h("p", { class: "source-head" }, h("span", { class: "num" }, String(source.n)), h("strong", {}, title)),
    h("p", { class: "meta" }, KIND[source.kind] || source.kind, raw && raw !== title ? ` · ${raw}` : "", " · ", relevance(source, ranked)),
    where ? h("p", { class: "location" }, where) : null,
    snippet,
    originalButton(source),
  );
}

/** The sources of a turn, the `n`th highlighted: those the answer cited, then the others the
 * search returned under an "Also retrieved" fold. */
export function openSources(turn, n, returnFocus) {
  const { cited, others, all } = splitSources(turn);
  const ranked = [...all].sort((a, b) => (Number(b.score) || 0) - (Number(a.score) || 0));
  const body = [];
  if (cited.length) body.push(h("ol", { class: "sources" }, cited.map((s) => sourceItem(turn, s, n, ranked))));
  else body.push(h("p", { class: "muted" }, all.length ? "The answer cites none of the sources below." : "This answer used no sources."));
  if (others.length) {
    const fold = h(
      "details",
      { class: "also", open: !cited.length || others.some((s) => s.n === n) },
      h("summary", {}, `Also retrieved (${others.length}), not cited`),
      h("ol", { class: "sources" }, others.map((s) => sourceItem(turn, s, n, ranked))),
    );
    body.push(fold);
  }
  open("Sources", h("div", {}, body), returnFocus)
    .querySelector(".source.current")
    ?.scrollIntoView({ block: "nearest" });
}

/** What produced the answer, as the record says: the extractive responder, an early answer
 * (FAQ, small talk, off topic), or a language model (with tools or not). */
export function answeredBy(turn) {
  const meta = turn.context_metadata || {};
  const route = (turn.triage || meta.triage || {}).route;
  const model = turn.model || meta.model || "";
  if (route === "faq") return "An FAQ entry (triage matched the question; no model ran)";
  if (route === "smalltalk") return "A fixed reply to small talk (no model ran)";
  if (route === "off_topic") return "The off-topic reply of the guardrail policy (no model ran)";
  if (model === "extractive") return "The extractive responder: sentences quoted from the sources (no language model is configured)";
  if (route === "tools") return `The language model ${model || "(unnamed)"}, with tools`;
  if (model) return `The language model ${model}`;
  return route ? `Route: ${route}` : null;
}

function tokenBar(used, budget) {
  if (typeof used !== "number") return null;
  if (!budget) return `${used} tokens (no budget: no model prompt was built)`;
  const share = Math.min(1, used / budget);
  const fill = h("span", { class: "fill" });
  fill.style.width = `${(100 * share).toFixed(1)}%`;
  return [
    h("span", { class: "token-bar", role: "meter", "aria-label": "Tokens used of the budget", "aria-valuemin": "0", "aria-valuemax": String(budget), "aria-valuenow": String(used) }, fill),
    h("span", { class: "muted" }, `${used} of ${budget} tokens (${Math.round(100 * share)} %)`),
  ];
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
  const what = (q) => (q.name === "cited" ? `${countOf((q.chunks || []).length, "source")} the last answer cited` : q.text);
  return h("ul", {}, queries.map((q) => h("li", {}, `${q.name} (weight ${q.weight}): ${what(q)}`)));
}

/** How a turn's answer was built, from its context metadata (and triage and validation). */
export function openBuild(turn, returnFocus) {
  const meta = turn.context_metadata || {};
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
      row("Answered by", answeredBy(turn)),
      row("Searched with", searchedWith(meta.retrieval)),
      row("Tokens used", tokenBar(meta.token_count, meta.token_budget)),
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

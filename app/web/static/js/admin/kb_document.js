// One knowledge-base document: what it is, its status history (newest first, ADR 0088),
// its chunks in reading order (paged), and delete behind a confirmation.

import { api } from "../api.js";
import { countOf, formatDate, h, mount } from "../dom.js";
import { confirmAction, frame, pager, statusLine, table, tag, when } from "./common.js";

/** An ingestion fact as words: a count by kind ({EMAIL: 2}) as "EMAIL: 2", none as "none"
 * (String() of an object read "[object Object]"). */
function fact(value) {
  if (value === null || typeof value !== "object") return String(value);
  const entries = Object.entries(value);
  return entries.length ? entries.map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`).join(", ") : "none";
}

export async function renderDocument(main, id) {
  const status = statusLine();
  const [doc, events, collections] = await Promise.all([api(`/kb/documents/${id}`), api(`/kb/documents/${id}/history`), api("/admin/collections")]);
  const collection = collections.items.find((c) => c.id === doc.collection_id);
  const facts = [
    ["Status", [tag(doc.status), doc.error ? h("span", { class: "error" }, ` ${doc.error}`) : null]],
    ["Collection", collection ? collection.name : "—"],
    ["File", doc.filename || "— (added as text)"],
    ["Type", doc.content_type || "—"],
    ["Size", countOf(doc.size_bytes, "byte")],
    ["Chunks", String(doc.chunk_count)],
    ["Added", when(doc.created_at)],
    ["Last change", when(doc.updated_at)],
  ];
  for (const [key, value] of Object.entries(doc.ingestion || {})) facts.push([key.replaceAll("_", " "), fact(value)]);
  // Newest first, the latest 50 (the API's bound): what happened last is read first.
  const history = table(
    [
      // To the second: an ingestion's steps are seconds apart.
      ["Time", (e) => h("time", { datetime: e.at }, formatDate(e.at, "medium"))],
      ["Status", (e) => tag(e.status)],
      ["Detail", (e) => (e.detail ? h("span", { class: e.status === "failed" ? "error" : null }, e.detail) : "—")],
    ],
    events,
    "No status recorded yet.",
  );
  const chunks = h("div");
  const paging = pager(
    (cursor) => api(`/kb/documents/${id}/chunks?limit=10${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`),
    (items) =>
      mount(
        chunks,
        table(
          [
            ["#", (c) => String(c.ordinal)],
            ["Heading", (c) => c.title || "—"],
            ["Text", (c) => h("div", { class: "chunk-text" }, c.text)],
            ["Tokens", (c) => String(c.token_count)],
          ],
          items,
          doc.status === "ready" ? "No chunks." : "No chunks yet: the document is not ready.",
        ),
      ),
    status,
  );
  const remove = h("button", { type: "button", class: "danger" }, "Delete document");
  remove.addEventListener("click", async () => {
    const sure = await confirmAction({
      title: "Delete this document?",
      message: `“${doc.title}” and its passages leave the knowledge base; answers can no longer cite it. This cannot be undone.`,
      confirm: "Delete document",
    });
    if (!sure) return;
    try {
      await api(`/kb/documents/${id}`, { method: "DELETE" });
      location.hash = "#/admin/kb";
    } catch (e) {
      status.fail(e);
    }
  });
  frame(
    main,
    doc.title,
    h("p", {}, h("a", { href: "#/admin/kb" }, "← All documents")),
    status.el,
    h("section", { class: "card build", "aria-labelledby": "doc-facts" }, h("h2", { id: "doc-facts" }, "Document"), h("dl", {}, facts.map(([label, value]) => [h("dt", {}, label), h("dd", {}, value)])), remove),
    h("section", { class: "card", "aria-labelledby": "doc-history" }, h("h2", { id: "doc-history" }, "Status history"), h("p", { class: "muted" }, "Newest first; the latest 50 changes."), history),
    h("section", { class: "card", "aria-labelledby": "doc-chunks" }, h("h2", { id: "doc-chunks" }, "Chunks"), chunks, paging.el),
  );
  await paging.reset();
}

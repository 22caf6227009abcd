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
    ["Collection", h("span", { id: "doc-collection" }, collection ? collection.name : "—")],
    ["File", doc.filename || "— (added as text)"],
    ["Type", doc.content_type || "—"],
    ["Size", countOf(doc.size_bytes, "byte")],
    ["Chunks", String(doc.chunk_count)],
    ["Added", when(doc.created_at)],
    ["Last change", when(doc.updated_at)],
  ];
  for (const [key, value] of Object.entries(doc.ingestion || {})) {
    if (key === "chunks") continue; // "Chunks" above
    const label = key === "pii_replaced" ? "PII replaced" : key.replaceAll("_", " ");
    facts.push([label.charAt(0).toUpperCase() + label.slice(1), fact(value)]);
  }
  const move = moveForm(doc, collections.items, status);
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
    h("section", { class: "card build", "aria-labelledby": "doc-facts" }, h("h2", { id: "doc-facts" }, "Document"), h("dl", {}, facts.map(([label, value]) => [h("dt", {}, label), h("dd", {}, value)])), move, remove),
    h("section", { class: "card", "aria-labelledby": "doc-history" }, h("h2", { id: "doc-history" }, "Status history"), h("p", { class: "muted" }, "Newest first; the latest 50 changes."), history),
    h("section", { class: "card", "aria-labelledby": "doc-chunks" }, h("h2", { id: "doc-chunks" }, "Chunks"), chunks, paging.el),
  );
  await paging.reset();
}

/** "Move to collection": the document and its chunks into another active collection. */
function moveForm(doc, collections, status) {
  const others = collections.filter((c) => c.status === "active" && c.id !== doc.collection_id);
  if (!others.length) return null;
  const select = h("select", { id: "doc-move" }, others.map((c) => h("option", { value: c.id }, c.name)));
  const form = h(
    "form",
    { class: "move-form", "aria-label": "Move to another collection" },
    h("label", { for: "doc-move" }, "Move to collection"),
    select,
    h("button", { type: "submit", class: "secondary" }, "Move"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const target = others.find((c) => c.id === select.value);
    try {
      await api(`/admin/collections/${target.id}/documents`, { method: "POST", body: { document_id: doc.id } });
      status.say(`Moved to ${target.name}: only the people who may see it find this document now.`);
      const shown = document.getElementById("doc-collection");
      if (shown) shown.textContent = target.name;
      const previous = collections.find((c) => c.id === doc.collection_id);
      doc.collection_id = target.id;
      select.querySelector(`option[value="${target.id}"]`).remove();
      if (previous) select.append(h("option", { value: previous.id }, previous.name));
    } catch (e) {
      status.fail(e);
    }
  });
  return form;
}

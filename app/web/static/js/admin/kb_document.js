// One knowledge-base document: what it is, its ingestion step by step, its chunks in
// reading order (paged), and delete behind a confirmation.

import { api } from "../api.js";
import { h, mount } from "../dom.js";
import { confirmAction, frame, pager, statusLine, table, tag, when } from "./common.js";

export async function renderDocument(main, id) {
  const status = statusLine();
  const [doc, steps, collections] = await Promise.all([api(`/kb/documents/${id}`), api(`/kb/documents/${id}/history`), api("/admin/collections")]);
  const collection = collections.items.find((c) => c.id === doc.collection_id);
  const facts = [
    ["Status", [tag(doc.status), doc.error ? h("span", { class: "error" }, ` ${doc.error}`) : null]],
    ["Collection", collection ? collection.name : "—"],
    ["File", doc.filename || "— (added as text)"],
    ["Type", doc.content_type || "—"],
    ["Size", `${doc.size_bytes} bytes`],
    ["Chunks", String(doc.chunk_count)],
    ["Added", when(doc.created_at)],
    ["Last change", when(doc.updated_at)],
  ];
  for (const [key, value] of Object.entries(doc.ingestion || {})) facts.push([key.replaceAll("_", " "), String(value)]);
  const history = h(
    "ol",
    { class: "history" },
    steps.map((step) => h("li", {}, tag(step.status), " ", step.detail || "", step.at ? h("span", { class: "muted" }, ` — ${when(step.at)}`) : null)),
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
    h("section", { class: "card", "aria-labelledby": "doc-history" }, h("h2", { id: "doc-history" }, "Status history"), history),
    h("section", { class: "card", "aria-labelledby": "doc-chunks" }, h("h2", { id: "doc-chunks" }, "Chunks"), chunks, paging.el),
  );
  await paging.reset();
}

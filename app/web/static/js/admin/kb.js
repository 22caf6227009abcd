// Knowledge base: upload many files at once (kb_upload.js) or text, the documents paged
// with live status and progress, each opening its own view (kb_document.js), delete behind
// a confirmation, and search over /kb/search with the scores.

import { api } from "../api.js";
import { countOf, h, mount } from "../dom.js";
import { setMarkdown } from "../markdown.js";
import { confirmAction, frame, pager, statusLine, table, tag, when } from "./common.js";
import { renderDocument } from "./kb_document.js";
import { collectionPicker, uploadCard } from "./kb_upload.js";

export async function render(main, key, rest = []) {
  if (rest.length) return renderDocument(main, rest[0]);
  const status = statusLine();
  const list = h("div");
  let timer = null;
  let documents = [];
  // The collections, for the upload's and the text's pickers and the list's names (ADR 0087).
  const collections = (await api("/admin/collections")).items;
  const collectionNames = Object.fromEntries(collections.map((c) => [c.id, c.name]));

  const draw = (items) => {
    documents = items;
    mount(
      list,
      table(
        [
          ["Title", (d) => h("a", { href: `#/admin/kb/${d.id}` }, d.title)],
          ["Collection", (d) => collectionNames[d.collection_id] || "—"],
          ["Status", (d) => [tag(d.status), d.status === "failed" && d.error ? h("div", { class: "error" }, d.error) : null]],
          ["Progress", (d) => (d.status === "ready" ? countOf(d.chunk_count, "chunk") : h("progress", { max: "1", value: d.progress || 0 }))],
          ["Added", (d) => when(d.created_at)],
          ["", (d) => h("button", { type: "button", class: "secondary danger", onclick: () => remove(d) }, "Delete")],
        ],
        items,
        "The knowledge base is empty.",
      ),
    );
    clearTimeout(timer);
    if (items.some((d) => d.status === "pending" || d.status === "processing") && main.isConnected) {
      timer = setTimeout(() => paging.reset(), 1000);
    }
  };
  const paging = pager((cursor) => api(`/kb/documents?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`), draw, status);

  async function remove(doc) {
    const sure = await confirmAction({
      title: "Delete this document?",
      message: `“${doc.title}” and its passages leave the knowledge base; answers can no longer cite it. This cannot be undone.`,
      confirm: "Delete document",
    });
    if (!sure) return;
    try {
      await api(`/kb/documents/${doc.id}`, { method: "DELETE" });
      status.say(`Deleted “${doc.title}”.`);
      await paging.reset();
    } catch (e) {
      status.fail(e);
    }
  }

  // A finished or added upload refreshes the list, at most once a second.
  let refresh = null;
  const uploads = uploadCard(() => {
    refresh ??= setTimeout(() => {
      refresh = null;
      if (main.isConnected) paging.reset();
    }, 1000);
  }, collections);

  const title = h("input", { type: "text", id: "kb-title", required: true, maxlength: "300" });
  const text = h("textarea", { id: "kb-text", rows: "4", required: true });
  const textCollection = collectionPicker("kb-text-collection", collections);
  const textForm = h("form", { class: "card", "aria-labelledby": "kb-text-title" }, h("h2", { id: "kb-text-title" }, "Add text"), h("label", { for: "kb-title" }, "Title"), title, h("label", { for: "kb-text" }, "Text (Markdown)"), text, h("label", { for: "kb-text-collection" }, "Into collection"), textCollection, h("button", { type: "submit", class: "primary" }, "Add"));
  textForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await api("/kb/documents", { method: "POST", body: { title: title.value, text: text.value, content_type: "text/markdown", collection_id: textCollection.value || null } });
      status.say(`Added “${title.value}”; it is being processed.`);
      title.value = "";
      text.value = "";
      await paging.reset();
    } catch (e) {
      status.fail(e);
    }
  });

  const query = h("input", { type: "search", id: "kb-query", placeholder: "Search the knowledge base", "aria-label": "Search query" });
  const hits = h("div");
  const searchForm = h("form", { class: "card", role: "search", "aria-labelledby": "kb-search" }, h("h2", { id: "kb-search" }, "Search"), h("div", { class: "row" }, query, h("button", { type: "submit", class: "primary" }, "Search")), hits);
  searchForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!query.value.trim()) return;
    try {
      const result = await api("/kb/search", { method: "POST", body: { query: query.value, k: 10 } });
      mount(
        hits,
        table(
          [
            ["Score", (hit) => hit.score.toFixed(3)],
            ["Document", (hit) => hit.title],
            ["Snippet", (hit) => {
              const cell = h("div", { class: "snippet markdown" });
              setMarkdown(cell, hit.snippet);
              return cell;
            }],
          ],
          result.items,
          "No match.",
        ),
      );
    } catch (e) {
      status.fail(e);
    }
  });

  frame(main, "Knowledge base", status.el, h("div", { class: "row cards" }, uploads.el, textForm), searchForm, h("section", { class: "card", "aria-labelledby": "kb-docs" }, h("h2", { id: "kb-docs" }, "Documents"), list, paging.el));
  await paging.reset();
  return documents;
}

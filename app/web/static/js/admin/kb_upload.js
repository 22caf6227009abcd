// Many files into the knowledge base at once, by picker or drag-and-drop: each file its own
// row with a progress bar, first for its bytes (XMLHttpRequest's upload progress: fetch has
// none), then for its ingestion (the document's own `progress`, polled), and how it ended.

import { ApiError, api, authHeaders, humanError } from "../api.js";
import { countOf, h } from "../dom.js";

const TYPES = ".pdf,.txt,.md,.markdown,.docx,.docm,.pptx,.xlsx,.xlsm,.csv,.html,.htm,.epub,.eml,.json,.odt,text/plain,text/markdown,text/html,text/csv,application/json,application/pdf";
const AT_ONCE = 2; // uploads in flight together: more only queue behind the same link
const POLL_MS = 1000;
const POLL_FOR_MS = 10 * 60 * 1000;

function sizeOf(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** A <select> of the collections an admin may add to (active ones), the default chosen. */
export function collectionPicker(id, collections) {
  const active = collections.filter((c) => c.status === "active");
  return h("select", { id, class: "collection-pick" }, active.map((c) => h("option", { value: c.id, selected: c.is_default ? true : null }, c.name)));
}

/** POST one file to /kb/documents (into `collectionId`, when given), reporting its bytes'
 * progress; resolves to the body. */
async function send(file, collectionId, onProgress) {
  const headers = await authHeaders();
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/kb/documents");
    for (const [name, value] of Object.entries(headers)) xhr.setRequestHeader(name, value);
    xhr.responseType = "json";
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    });
    xhr.addEventListener("load", () => {
      const body = xhr.response;
      if (xhr.status >= 200 && xhr.status < 300) resolve(body);
      else reject(new ApiError(xhr.status, body?.error?.code || `http_${xhr.status}`, body?.error?.message || "", null));
    });
    xhr.addEventListener("error", () => reject(new TypeError("network")));
    const form = new FormData();
    form.append("file", file, file.name);
    if (collectionId) form.append("collection_id", collectionId);
    xhr.send(form);
  });
}

/** The upload card, its files going into the collection picked in it (`collections`: the
 * admin's, from /admin/collections); `changed()` is called whenever a document was added or
 * finished. */
export function uploadCard(changed, collections) {
  const picker = collectionPicker("kb-collection", collections);
  const input = h("input", { type: "file", id: "kb-files", multiple: true, accept: TYPES });
  const rows = h("ul", { class: "uploads", "aria-label": "Uploads" });
  const zone = h(
    "div",
    { class: "drop-zone" },
    h("label", { for: "kb-files" }, "Drop files here, or choose them"),
    input,
    h("p", { class: "muted" }, "PDF, Word, PowerPoint, Excel, OpenDocument, EPUB, e-mail, HTML, CSV, JSON, Markdown or plain text; several at once."),
  );
  const el = h("section", { class: "card", "aria-labelledby": "kb-upload" }, h("h2", { id: "kb-upload" }, "Upload files"), h("label", { for: "kb-collection" }, "Into collection"), picker, zone, rows);
  const queue = [];
  let running = 0;

  function row(file) {
    const bar = h("progress", { max: "1", value: "0", "aria-label": `Progress of ${file.name}` });
    const state = h("span", { class: "upload-state" }, "Waiting");
    const item = h("li", { class: "upload" }, h("span", { class: "upload-name" }, file.name), h("span", { class: "muted" }, sizeOf(file.size)), bar, state);
    rows.append(item);
    return {
      set(text, value = null, kind = "") {
        state.textContent = text;
        item.dataset.state = kind;
        if (value === null) bar.removeAttribute("value");
        else bar.value = value;
      },
    };
  }

  async function one(file, collectionId, view) {
    try {
      view.set("Uploading 0 %", 0, "uploading");
      const accepted = await send(file, collectionId, (share) => view.set(`Uploading ${Math.round(share * 100)} %`, share, "uploading"));
      if (accepted.duplicate) {
        view.set("Already in the knowledge base", 1, "duplicate");
        return;
      }
      changed();
      const until = Date.now() + POLL_FOR_MS;
      while (Date.now() < until) {
        const doc = await api(`/kb/documents/${accepted.id}`);
        if (doc.status === "ready") {
          view.set(`Ready — ${countOf(doc.chunk_count, "chunk")}`, 1, "ready");
          changed();
          return;
        }
        if (doc.status === "failed") {
          view.set(`Failed: ${doc.error || "unknown reason"}`, 0, "failed");
          changed();
          return;
        }
        view.set(`Processing ${Math.round((doc.progress || 0) * 100)} %`, doc.progress || 0, "processing");
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
      view.set("Still processing — see the list below", null, "processing");
    } catch (error) {
      view.set(humanError(error), 0, "failed");
    }
  }

  function pump() {
    while (running < AT_ONCE && queue.length) {
      const [file, collectionId, view] = queue.shift();
      running += 1;
      one(file, collectionId, view).finally(() => {
        running -= 1;
        pump();
      });
    }
  }

  function add(files) {
    // The collection picked when the files were dropped, whatever is picked while they queue.
    const collectionId = picker.value;
    for (const file of files) queue.push([file, collectionId, row(file)]);
    pump();
  }

  input.addEventListener("change", () => {
    add([...input.files]);
    input.value = "";
  });
  zone.addEventListener("dragover", (event) => {
    event.preventDefault();
    zone.classList.add("dragging");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("dragging"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("dragging");
    if (event.dataTransfer?.files?.length) add([...event.dataTransfer.files]);
  });
  return { el, add };
}

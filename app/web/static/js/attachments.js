// A conversation's documents: upload (picker or drag-and-drop), live ingestion status and
// progress, the list of documents active in the conversation, each removable.

import { api, humanError } from "./api.js";
import { announce, h, mount } from "./dom.js";

const POLL_MS = 700;

/** `getSessionId()`: the conversation's id (null for a new chat); `ensureSession()`: its id,
 * storing a new chat first (an attached file is its first content). */
export function attachmentsBar(getSessionId, ensureSession = async () => getSessionId()) {
  const list = h("ul", { class: "attachments", "aria-label": "Documents in this conversation" });
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const input = h("input", { type: "file", class: "sr-only", id: "attach-input", accept: ".pdf,.txt,.md,.markdown,.docx,.docm,.pptx,.xlsx,.xlsm,.csv,.html,.htm,.epub,.eml,.json,.odt,text/plain,text/markdown,text/html,text/csv,application/json,application/pdf", multiple: true });
  const picker = h("label", { class: "button secondary", for: "attach-input" }, "Attach file", input);
  const items = new Map();

  function showError(message) {
    error.hidden = !message;
    error.textContent = message || "";
  }

  function chip(doc) {
    const progress = h("progress", { max: "1", value: doc.progress ?? 0 });
    const label = h("span", { class: "status-label" });
    const remove = h("button", { type: "button", class: "icon", "aria-label": `Remove ${doc.filename || "document"}` }, "✕");
    const el = h("li", { class: "chip" }, h("span", { class: "name" }, doc.filename || "document"), label, progress, remove);
    remove.addEventListener("click", async () => {
      try {
        await api(`/sessions/${getSessionId()}/attachments/${doc.id}`, { method: "DELETE" });
        el.remove();
        items.delete(doc.id);
        announce(`${doc.filename} removed from this conversation.`);
      } catch (e) {
        showError(humanError(e));
      }
    });
    const update = (next) => {
      Object.assign(doc, next);
      el.dataset.status = doc.status;
      label.textContent = doc.status === "ready" ? "ready" : doc.status === "failed" ? `failed: ${doc.error || "unreadable"}` : `${doc.status}…`;
      progress.value = doc.status === "ready" ? 1 : doc.progress || 0;
      progress.hidden = doc.status === "ready" || doc.status === "failed";
    };
    update(doc);
    items.set(doc.id, { el, update });
    return el;
  }

  async function watch(doc) {
    while (items.has(doc.id) && doc.status !== "ready" && doc.status !== "failed") {
      await new Promise((r) => setTimeout(r, POLL_MS));
      try {
        const next = await api(`/attachments/${doc.id}`);
        items.get(doc.id)?.update(next);
        if (next.status === "ready") announce(`${doc.filename} is ready.`);
        if (next.status === "failed") announce(`${doc.filename} could not be read.`);
      } catch {
        return;
      }
    }
  }

  async function upload(files) {
    showError("");
    for (const file of files) {
      const form = new FormData();
      form.append("file", file, file.name);
      try {
        const doc = await api("/attachments", { method: "POST", form });
        await api(`/sessions/${await ensureSession()}/attachments/${doc.id}`, { method: "PUT" });
        if (!items.has(doc.id)) list.append(chip(doc));
        watch(doc);
      } catch (e) {
        showError(`${file.name}: ${humanError(e)}`);
      }
    }
  }

  input.addEventListener("change", () => {
    upload([...input.files]);
    input.value = "";
  });

  async function load() {
    items.clear();
    mount(list);
    const sessionId = getSessionId();
    if (!sessionId) return;
    try {
      const { items: docs } = await api(`/sessions/${sessionId}/attachments`);
      for (const doc of docs) {
        list.append(chip(doc));
        watch(doc);
      }
    } catch (e) {
      showError(humanError(e));
    }
  }

  /** Make `zone` accept dropped files. */
  function dropZone(zone) {
    zone.addEventListener("dragover", (event) => {
      event.preventDefault();
      zone.classList.add("dragging");
    });
    zone.addEventListener("dragleave", () => zone.classList.remove("dragging"));
    zone.addEventListener("drop", (event) => {
      event.preventDefault();
      zone.classList.remove("dragging");
      if (event.dataTransfer?.files?.length) upload([...event.dataTransfer.files]);
    });
  }

  return { list, error, picker, load, dropZone };
}

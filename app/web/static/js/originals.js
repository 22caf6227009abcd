// Opening the original file a source was quoted from. The API wants the bearer token, so the
// file is fetched and handed to the browser as a blob. A blob: URL has this page's origin, so
// only a PDF (typed as one by the server) is opened, at its page (`#page=N`); anything else
// (an HTML or SVG upload above all) is only ever saved, never rendered here.

import { humanError, request, toError } from "./api.js";
import { h } from "./dom.js";

const PATHS = { kb: "/kb/documents", attachment: "/attachments" };

/** The file endpoint of a source, or null when it has none (an FAQ entry). */
export function originalPath(source) {
  const base = PATHS[source.kind];
  return base && source.source_id ? `${base}/${encodeURIComponent(source.source_id)}/file` : null;
}

/** The page a location points at (the first of a range), or null. */
export function locationPage(source) {
  const page = Number(source.location && source.location.page);
  return Number.isInteger(page) && page > 0 ? page : null;
}

function savedName(response, source) {
  const header = response.headers.get("Content-Disposition") || "";
  const exact = /filename\*=UTF-8''([^;]+)/i.exec(header);
  return exact ? decodeURIComponent(exact[1]) : String(source.title || "document");
}

async function openOriginal(source, status) {
  status.textContent = "";
  try {
    const response = await request(originalPath(source));
    if (!response.ok) throw await toError(response);
    const isPdf = (response.headers.get("Content-Type") || "").startsWith("application/pdf");
    const data = await response.arrayBuffer();
    const blob = new Blob([data], { type: isPdf ? "application/pdf" : "application/octet-stream" });
    const url = URL.createObjectURL(blob);
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    if (isPdf) {
      const page = locationPage(source);
      window.open(page ? `${url}#page=${page}` : url, "_blank", "noopener");
      return;
    }
    const link = h("a", { href: url, download: savedName(response, source) });
    link.click();
  } catch (error) {
    status.textContent = humanError(error);
  }
}

/** A button that opens (a PDF, at its page) or saves the source's original file. */
export function originalButton(source) {
  if (!originalPath(source)) return null;
  const page = locationPage(source);
  const status = h("span", { class: "muted", role: "status" });
  const label = page ? `Open the original at page ${page}` : "Open the original";
  const button = h("button", { type: "button", class: "link", onclick: () => openOriginal(source, status) }, label);
  return h("p", { class: "original" }, button, status);
}

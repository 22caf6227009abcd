// Icons drawn as inline SVG (no font or emoji needed; the strict CSP allows SVG elements).
// The thumb is Feather's "thumbs-up" (MIT); down is the same turned over by the stylesheet.

const SVG = "http://www.w3.org/2000/svg";
const THUMB = "M14 9V5a3 3 0 0 0-3-3l-4 9v11h11.28a2 2 0 0 0 2-1.7l1.38-9a2 2 0 0 0-2-2.3zM7 22H4a2 2 0 0 1-2-2v-7a2 2 0 0 1 2-2h3";

/** A thumb icon, `up` or `down`, hidden from screen readers (its button or tag names it). */
export function thumbIcon(value) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  svg.setAttribute("class", `icon thumb-icon ${value}`);
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", THUMB);
  svg.append(path);
  return svg;
}

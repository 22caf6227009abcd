// Safe Markdown: every character of the source is HTML-escaped first; only then are the
// few constructs below turned into tags this module writes itself. Links keep their
// target only when it is http(s); anything else renders as its text. No raw HTML, no
// images, no attributes from the source other than an escaped http(s) href.

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

function safeHref(escapedUrl) {
  // The URL is already escaped (no quote can close the attribute); it must be http(s).
  return /^https?:\/\/[^\s]+$/i.test(escapedUrl) ? escapedUrl : null;
}

function inline(text, options) {
  // Code spans first, so nothing inside them is interpreted.
  return text
    .split(/(`[^`\n]+`)/)
    .map((part, i) => {
      if (i % 2 === 1) return `<code>${escapeHtml(part.slice(1, -1))}</code>`;
      let out = escapeHtml(part);
      // Links become placeholders, so emphasis and citations never reach inside an href.
      const links = [];
      out = out.replace(/\[([^\]\n]+)\]\(([^)\s]+)\)/g, (_, label, url) => {
        const href = safeHref(url);
        links.push(
          href
            ? `<a href="${href}" target="_blank" rel="noopener noreferrer nofollow">${label}</a>`
            : label,
        );
        return `\u0000${links.length - 1}\u0000`;
      });
      out = out.replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>");
      out = out.replace(/(^|[\s(])\*([^*\n]+)\*(?=[\s.,;:!?)]|$)/g, "$1<em>$2</em>");
      out = out.replace(/(^|[\s(])_([^_\n]+)_(?=[\s.,;:!?)]|$)/g, "$1<em>$2</em>");
      if (options.citations) {
        out = out.replace(
          /\[(\d{1,3})\]/g,
          (_, n) =>
            `<button type="button" class="cite" data-cite="${n}" ` +
            `aria-label="Source ${n}">${n}</button>`,
        );
      }
      out = out.replace(/\u0000(\d+)\u0000/g, (_, i) => links[Number(i)]);
      return out;
    })
    .join("");
}

/** Markdown source → HTML safe to insert: headings, lists, quotes, code, links, emphasis. */
export function renderMarkdown(source, options = {}) {
  const lines = String(source ?? "").replace(/\r\n?/g, "\n").split("\n");
  const html = [];
  let paragraph = [];
  let list = null;

  const flushParagraph = () => {
    if (paragraph.length) html.push(`<p>${inline(paragraph.join("\n"), options).replace(/\n/g, "<br>")}</p>`);
    paragraph = [];
  };
  const flushList = () => {
    if (list) html.push(`<${list.tag}>${list.items.map((i) => `<li>${inline(i, options)}</li>`).join("")}</${list.tag}>`);
    list = null;
  };

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (/^```/.test(line)) {
      flushParagraph();
      flushList();
      const code = [];
      for (i++; i < lines.length && !/^```/.test(lines[i]); i++) code.push(lines[i]);
      html.push(`<pre><code>${escapeHtml(code.join("\n"))}</code></pre>`);
      continue;
    }
    const heading = /^(#{1,4})\s+(.*)$/.exec(line);
    const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
    const numbered = /^\s*\d+[.)]\s+(.*)$/.exec(line);
    const quote = /^>\s?(.*)$/.exec(line);
    if (heading) {
      flushParagraph();
      flushList();
      const level = heading[1].length + 2; // h3..h6 inside a message
      html.push(`<h${level}>${inline(heading[2], options)}</h${level}>`);
    } else if (bullet || numbered) {
      flushParagraph();
      const tag = bullet ? "ul" : "ol";
      if (list && list.tag !== tag) flushList();
      if (!list) list = { tag, items: [] };
      list.items.push((bullet || numbered)[1]);
    } else if (quote) {
      flushParagraph();
      flushList();
      html.push(`<blockquote>${inline(quote[1], options)}</blockquote>`);
    } else if (!line.trim()) {
      flushParagraph();
      flushList();
    } else {
      flushList();
      paragraph.push(line);
    }
  }
  flushParagraph();
  flushList();
  return html.join("");
}

/** Put rendered Markdown into `el` (a template parses it inert: no script runs). */
export function setMarkdown(el, source, options = {}) {
  const template = document.createElement("template");
  template.innerHTML = renderMarkdown(source, options);
  el.replaceChildren(template.content);
}

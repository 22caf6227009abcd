// Markdown by well-kept libraries (docs/adr/0043-markdown-by-libraries.md): marked parses
// (GFM: tables, nested and task lists, fenced code, strikethrough), DOMPurify sanitises what
// it made, highlight.js colours finished code blocks (loaded on first use). What the source
// may produce is narrowed before and after the parse:
// - raw HTML in the source is shown as text, never parsed (an answer quoting `<script>` shows
//   it); images render as their description;
// - a link keeps its target only when it is http(s) (new tab, no referrer) or the app's own
//   (`/…`, `#…`); any other link (javascript:, data:, a target the output guardrail removed)
//   renders as its label, plain text;
// - DOMPurify then allows only the tags and attributes below, and only those URLs.

import DOMPurify from "../vendor/dompurify-3.4.18/purify.es.js";
import { Marked } from "../vendor/marked-18.2.1/marked.esm.js";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const REMOVED_LINK = "[link removed]"; // the output guardrail's marker for a link no source has

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** The href to keep, or null: http(s) URLs and the app's own paths only. */
export function safeHref(href) {
  const url = String(href || "").trim();
  if (/^https?:\/\/[^\s]+$/i.test(url)) return url;
  if (/^\/(?!\/)[^\s]*$/.test(url) || /^#[^\s]*$/.test(url)) return url;
  return null;
}

function languageOf(lang) {
  const match = /^[\w+#.-]{1,30}/.exec(String(lang || "").trim());
  return match ? match[0].toLowerCase() : "";
}

const renderer = {
  html({ text }) {
    return escapeHtml(text);
  },
  image({ text }) {
    return escapeHtml(text);
  },
  heading({ tokens, depth }) {
    const level = Math.min(depth + 2, 6); // h3..h6 inside a message
    return `<h${level}>${this.parser.parseInline(tokens)}</h${level}>\n`;
  },
  link({ href, title, tokens }) {
    const label = this.parser.parseInline(tokens);
    const safe = safeHref(href);
    if (!safe) return label;
    const external = /^https?:/i.test(safe);
    const titled = title ? ` title="${escapeHtml(title)}"` : "";
    const target = external ? ' target="_blank" rel="noopener noreferrer nofollow"' : "";
    return `<a href="${escapeHtml(safe)}"${titled}${target}>${label}</a>`;
  },
  code({ text, lang }) {
    const language = languageOf(lang);
    const cls = language ? ` class="language-${escapeHtml(language)}"` : "";
    return (
      `<div class="code-block"><div class="code-head"><span class="code-lang">${escapeHtml(language || "text")}</span>` +
      `<button type="button" class="copy-code">Copy code</button></div>` +
      // Focusable, so a wide block scrolls with the keyboard too.
      `<pre tabindex="0"><code${cls}>${escapeHtml(text)}</code></pre></div>\n`
    );
  },
};

// `[n]`: a numbered citation (not a link `[n](…)`), a button that opens source n.
const citation = {
  name: "citation",
  level: "inline",
  start(src) {
    const at = src.search(/\[\d{1,3}\]/);
    return at < 0 ? undefined : at;
  },
  tokenizer(src) {
    const match = /^\[(\d{1,3})\](?!\()/.exec(src);
    if (match) return { type: "citation", raw: match[0], n: match[1] };
    return undefined;
  },
  renderer(token) {
    return `<button type="button" class="cite" data-cite="${token.n}" aria-label="Source ${token.n}">${token.n}</button>`;
  },
};

const options = { gfm: true, breaks: true, async: false };
const plain = new Marked(options, { renderer });
const cited = new Marked(options, { renderer, extensions: [citation] });

const PURIFY = {
  ALLOWED_TAGS: [
    "p", "br", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "h3", "h4", "h5", "h6", "hr", "table", "thead", "tbody", "tr", "th", "td", "a", "button",
    "div", "span", "input",
  ],
  ALLOWED_ATTR: [
    "href", "title", "target", "rel", "class", "data-cite", "aria-label", "type", "tabindex",
    "start", "align", "checked", "disabled",
  ],
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  // The renderer's link rule once more, on what came out: a link without a safe target
  // loses it (and is unwrapped to its text below).
  if (node.nodeName === "A" && !safeHref(node.getAttribute("href"))) node.removeAttribute("href");
});
DOMPurify.addHook("uponSanitizeElement", (node, data) => {
  // The only input Markdown makes is a task list's checkbox: read-only.
  if (data.tagName === "input") {
    if (node.getAttribute("type") !== "checkbox") node.remove();
    else {
      node.setAttribute("disabled", "");
      node.setAttribute("aria-label", node.hasAttribute("checked") ? "Done" : "Not done");
    }
  }
});

function prepare(source) {
  // A link whose target the guardrail removed shows its label alone: today's guard writes
  // `label [link removed]`; answers stored before it, `[label]([link removed])` (given a
  // target the link rule refuses, it renders as that label).
  return String(source ?? "")
    .split(`](${REMOVED_LINK})`)
    .join("](javascript:removed)")
    .split(` ${REMOVED_LINK}`)
    .join("");
}

/** Markdown source → a sanitised DocumentFragment. */
export function renderMarkdown(source, { citations = false } = {}) {
  const html = (citations ? cited : plain).parse(prepare(source));
  const fragment = DOMPurify.sanitize(html, PURIFY);
  for (const a of fragment.querySelectorAll("a:not([href])")) a.replaceWith(...a.childNodes);
  return fragment;
}

/** Put rendered Markdown into `el`; `highlight`: colour its code blocks (finished text only). */
export function setMarkdown(el, source, options = {}) {
  el.replaceChildren(renderMarkdown(source, options));
  if (options.highlight) highlightCode(el);
}

// --- streaming: finished blocks are rendered once ------------------------------------------

const FENCE = /^ {0,3}(`{3,}|~{3,})/;

/** A Markdown view of a text that only grows (a streamed answer): the part up to the last
 * block boundary is rendered once and kept; only the unfinished last block is rendered again
 * on each update, so a frame costs the last block, not the whole answer. A boundary is the
 * start of a line that begins at the margin after a blank line, outside a code fence; a
 * text that no longer starts with what was kept (the final answer differs) starts over. */
export function liveMarkdown(el, options = {}) {
  let kept = ""; // source rendered for good
  let scan = 0; // where the next line to look at starts
  let boundary = 0; // the last boundary found
  let fence = null; // the open fence's marker while inside a code block
  let blank = false; // the previous line was blank
  let tail = []; // nodes of the unfinished part

  function reset() {
    el.replaceChildren();
    kept = "";
    scan = boundary = 0;
    fence = null;
    blank = false;
    tail = [];
  }

  function findBoundary(source) {
    let end;
    while ((end = source.indexOf("\n", scan)) !== -1) {
      const start = scan;
      const line = source.slice(start, end);
      scan = end + 1;
      if (fence) {
        const close = FENCE.exec(line);
        if (close && close[1][0] === fence[0] && close[1].length >= fence.length && !line.slice(close[0].length).trim()) fence = null;
        continue;
      }
      if (!line.trim()) {
        blank = true;
        continue;
      }
      if (blank && /^\S/.test(line)) boundary = start;
      blank = false;
      const open = FENCE.exec(line);
      if (open) fence = open[1];
    }
  }

  return {
    /** Show `source`, rendering only what changed since the last call. */
    update(source) {
      source = String(source ?? "");
      if (!source.startsWith(kept)) reset();
      findBoundary(source);
      const removed = tail;
      if (boundary > kept.length) {
        const finished = renderMarkdown(source.slice(kept.length, boundary), options);
        for (const node of removed) node.remove();
        el.append(finished);
        kept = source.slice(0, boundary);
      } else {
        for (const node of removed) node.remove();
      }
      const rest = renderMarkdown(source.slice(kept.length), options);
      tail = [...rest.childNodes];
      el.append(rest);
    },
    reset,
  };
}

// --- code: copy and highlighting ---------------------------------------------------------------

document.addEventListener("click", (event) => {
  const button = event.target.closest?.(".copy-code");
  if (!button) return;
  const code = button.closest(".code-block")?.querySelector("code");
  if (!code) return;
  copyText(code.textContent, button, "Copy code");
});

/** Copy `text`, then say so on `button` for a moment. */
export async function copyText(text, button, label) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Copy failed";
  }
  setTimeout(() => {
    button.textContent = label;
  }, 1500);
}

const HLJS = "../vendor/highlightjs-11.12.0";
const ALIASES = {
  js: "javascript", jsx: "javascript", mjs: "javascript", ts: "typescript", tsx: "typescript",
  py: "python", sh: "bash", zsh: "bash", console: "shell", html: "xml", svg: "xml",
  yml: "yaml", golang: "go", rs: "rust", "c++": "cpp", cs: "csharp", "c#": "csharp",
  rb: "ruby", toml: "ini", md: "markdown", patch: "diff", docker: "dockerfile",
};
const LANGUAGES = new Set([
  "bash", "c", "cpp", "csharp", "css", "diff", "dockerfile", "go", "ini", "java", "javascript",
  "json", "markdown", "php", "python", "ruby", "rust", "shell", "sql", "typescript", "xml", "yaml",
]);
let hljs = null;
const loading = new Map();

async function grammar(name) {
  if (!loading.has(name)) {
    loading.set(
      name,
      (async () => {
        hljs ||= import(`${HLJS}/core.min.js`).then((m) => {
          m.default.configure({ ignoreUnescapedHTML: true });
          return m.default;
        });
        const [core, language] = await Promise.all([hljs, import(`${HLJS}/languages/${name}.min.js`)]);
        core.registerLanguage(name, language.default);
        return core;
      })(),
    );
  }
  return loading.get(name);
}

/** Colour the code blocks of `el` whose language is known (the modules load on first use). */
export async function highlightCode(el) {
  for (const code of el.querySelectorAll("pre code[class^='language-']")) {
    const asked = code.className.slice("language-".length);
    const name = ALIASES[asked] || asked;
    if (!LANGUAGES.has(name)) continue;
    try {
      const core = await grammar(name);
      if (code.isConnected && !code.classList.contains("hljs")) core.highlightElement(code);
    } catch {
      // Highlighting is a nicety: the block stays readable without it.
    }
  }
}

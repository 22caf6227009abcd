"""Links in an answer as a Markdown or HTML renderer would load them, and their removal.

An answer goes to clients that render Markdown, raw HTML included (the web app, Open WebUI and
other OpenAI-API clients). Any URL that leaves the page is an exfiltration channel: an image
loads by itself, with whatever the model put in its query string. So the guard finds URLs
where a renderer finds them, not by the shape of `http://`:

- Markdown inline links and images `[t](dest "title")`, reference definitions `[r]: dest`,
  autolinks `<scheme:...>`, with backslash escapes and HTML entities decoded (CommonMark);
- raw HTML: every URL attribute of every tag (`href`, `src`, `srcset`, `action`, `poster`,
  `xlink:href`, ..., `style`'s `url()`, a refresh's `content`), entities decoded, and CSS
  `url()` inside `<style>`;
- bare `http(s)://`, `ftp://` and `www.` text, as GitHub-flavoured renderers link it.

A destination *leaves the page* when a browser would resolve it to another origin: it has a
scheme (`https:evil.example`, `javascript:`) or is a network path (`//host`, and the `\\host`,
`/\\host` a browser reads as one), after stripping what browsers strip (surrounding controls
and spaces, tabs and newlines anywhere). Relative links stay: they go to the page's own origin.

`remove_links` replaces each construct with such a destination, unless `allowed` says a
source holds it, by a marker; then CommonMark parsing (markdown-it, raw HTML on) checks that no
such destination is left, and if one is (a form the scanner missed) the answer's markup is
escaped so that it renders as text. docs/adr/0048.

Over 300 lines because the scanner of each construct and the renderer's check it is verified
by are one contract: split, a form added to one could be missed by the other.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from typing import NamedTuple

from markdown_it import MarkdownIt
from markdown_it.token import Token

MARKER = "[link removed]"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_SPECIAL = {"http", "https", "ftp", "ws", "wss", "file"}
_C0_AND_SPACE = "".join(chr(c) for c in range(0x21))
_TAB_OR_NEWLINE = re.compile(r"[\t\n\r]")
_BARE = re.compile(
    r"(?<![\w@/\\])(?:(?:https?|ftp):[/\\]*|www\.)[^\s<>()\[\]{}\"'`|^]+", re.IGNORECASE
)
_TRAILING = ".,;:!?*_~"
_ENTITY = re.compile(r"&(?:#[0-9]{1,8};?|#[xX][0-9a-fA-F]{1,8};?|[A-Za-z][A-Za-z0-9]{1,31};?)")
_CSS_URL = re.compile(r"""url\(\s*(['"]?)(.*?)\1\s*\)|@import\s+(['"])(.*?)\3""", re.I | re.S)
_REFRESH_URL = re.compile(r"url\s*=\s*['\"]?([^'\"]+)", re.IGNORECASE)
_URL_ATTRIBUTES = {
    "href",
    "src",
    "action",
    "formaction",
    "poster",
    "background",
    "cite",
    "data",
    "longdesc",
    "lowsrc",
    "dynsrc",
    "manifest",
    "icon",
    "codebase",
    "archive",
    "usemap",
    "profile",
    "xlink:href",
    "xml:base",
    "classid",
    "itemtype",
    "imagesrcset",
    "srcset",
    "ping",
}
_LIST_ATTRIBUTES = {"srcset", "imagesrcset", "ping"}
_MARKUP = re.compile(r"([\\`*_\[\]()<>!&#~|])")
_MAX_ROUNDS = 3
_MAX_LINK_TEXT = 1000
_MAX_DESTINATION = 4096
_MAX_CONSTRUCTS = 500


def leaves_the_page(url: str) -> bool:
    """Whether a browser would load `url` from another origin (or run it): it has a scheme,
    or is a network path, once the characters browsers ignore are taken out."""
    form = _browser_form(url)
    if _SCHEME.match(form) or form[:4].lower() == "www.":  # www.: as GFM autolinks it
        return True
    return form[:2].replace("\\", "/") == "//"


def canonical(url: str) -> str:
    """`url` written the usual way (`https:\\\\host` and `//host` as `https://host`), for
    finding it in the sources."""
    form = _browser_form(url)
    scheme = _SCHEME.match(form)
    if scheme and scheme.group(0)[:-1].lower() in _SPECIAL:
        rest = form[scheme.end() :].lstrip("/\\")
        return f"{scheme.group(0)[:-1].lower()}://{rest}"
    if form[:2].replace("\\", "/") == "//":
        return "https://" + form.lstrip("/\\")
    return form


def _browser_form(url: str) -> str:
    return _TAB_OR_NEWLINE.sub("", url.strip(_C0_AND_SPACE))


class _Link(NamedTuple):
    """A construct's span in the raw text and the destination a renderer decodes from it;
    `whole`: False when the destination was cut at `_MAX_DESTINATION` (never a source's)."""

    start: int
    end: int
    url: str
    whole: bool = True
    label: str | None = None
    """A Markdown link's text, kept when the link is removed (never an image's)."""


def remove_links(text: str, allowed: Callable[[str], bool]) -> tuple[str, int]:
    """The text without the links that leave the page and are not `allowed`, and how many
    constructs were replaced by the marker."""

    def offending(link: _Link) -> bool:
        return leaves_the_page(link.url) and not (link.whole and allowed(link.url))

    removed = 0
    plain = _too_many_constructs(text)
    for _ in range(0 if plain else _MAX_ROUNDS):
        text, replaced = _replace(text, [link for link in _constructs(text) if offending(link)])
        removed += replaced
        if not replaced:
            break
    if plain or any(offending(_Link(0, 0, url)) for url in rendered_destinations(text)):
        # Too much markup to read it all, or a form the scanner does not know: the whole
        # answer renders as plain text instead, its bare links removed.
        text = _MARKUP.sub(r"\\\1", text)
        text, replaced = _replace(text, [link for link in _bare(text) if offending(link)])
        removed += max(1, replaced)
    return text, removed


def _too_many_constructs(text: str) -> bool:
    """More links or tags than an answer needs: reading each would cost too much."""
    return text.count("](") > _MAX_CONSTRUCTS or text.count("<") > _MAX_CONSTRUCTS


def _replace(text: str, links: list[_Link]) -> tuple[str, int]:
    """`text` with each of `links` (overlapping ones merged) replaced by the marker; a
    Markdown link keeps its text before it ("the docs [link removed]", not a reader left
    with `[link removed]` alone). Its text is scanned again in the next round, so a link
    inside it is removed too."""
    merged: list[tuple[int, int, str | None]] = []
    for link in sorted(links):
        if merged and link.start < merged[-1][1]:
            start, end, label = merged[-1]
            # A construct inside another (the bare URL in a link's destination) keeps the
            # outer one's text; two that only overlap keep none.
            merged[-1] = (start, max(link.end, end), label if link.end <= end else None)
        else:
            merged.append((link.start, link.end, link.label))
    for start, end, label in reversed(merged):
        kept = f"{label.strip()} " if label and label.strip() else ""
        text = text[:start] + kept + MARKER + text[end:]
    return text, len(merged)


# --- The scanner: each construct's span in the raw text and its decoded destination ------


def _constructs(text: str) -> Iterator[_Link]:
    yield from _inline_links(text)
    yield from _definitions(text)
    yield from _autolinks(text)
    yield from _html_tags(text)
    yield from _bare(text)


def _unescape_markdown(raw: str) -> str:
    """A CommonMark destination's value: backslash escapes of punctuation, then entities."""
    return html.unescape(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", raw))


def _inline_links(text: str) -> Iterator[_Link]:
    for match in re.finditer(r"\]\s?\(", text):
        if _escaped(text, match.start()):
            continue
        destination, end = _destination(text, match.end())
        if destination is None:
            continue
        whole = len(destination) < _MAX_DESTINATION
        start = _opening_bracket(text, match.start())
        label = text[start + 1 : match.start()] if start < match.start() else None
        if start > 0 and text[start - 1] == "!":
            start, label = start - 1, None
        close = text.find(")", end)
        newline = text.find("\n\n", end)
        if close != -1 and (newline == -1 or close < newline):
            end = close + 1
        yield _Link(start, end, _unescape_markdown(destination), whole, label)


def _destination(text: str, at: int) -> tuple[str | None, int]:
    """The raw destination starting at `at` (after optional spaces and one newline)."""
    i = at
    while i < len(text) and text[i] in " \t":
        i += 1
    if i < len(text) and text[i] == "\n":
        i += 1
        while i < len(text) and text[i] in " \t":
            i += 1
    if i < len(text) and text[i] == "<":
        close = i + 1
        while close < len(text) and text[close] not in ">\n":
            close += 2 if text[close] == "\\" else 1
        return text[i + 1 : close], min(close + 1, len(text))
    start, depth = i, 0
    while i < len(text) and i - start < _MAX_DESTINATION:
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            i += 2
            continue
        if char.isspace() or ord(char) < 0x20:
            break
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                break
            depth -= 1
        i += 1
    if i == start:
        return None, i
    return text[start:i], i


def _opening_bracket(text: str, close: int) -> int:
    """The `[` that opens the link text closed at `close`, looked for within a bound (else
    `close`: the destination alone is then replaced), so many `](` stay linear."""
    depth = 0
    for i in range(close, max(-1, close - _MAX_LINK_TEXT), -1):
        if text[i] == "]" and not _escaped(text, i):
            depth += 1
        elif text[i] == "[" and not _escaped(text, i):
            depth -= 1
            if depth == 0:
                return i
    return close


def _escaped(text: str, i: int) -> bool:
    slashes = 0
    while i - slashes - 1 >= 0 and text[i - slashes - 1] == "\\":
        slashes += 1
    return slashes % 2 == 1


_DEFINITION = re.compile(
    r"^ {0,3}\[(?:[^\]\\]|\\.)+\]:[ \t]*\n?[ \t]*(<[^>\n]*>|\S+)", re.MULTILINE | re.DOTALL
)


def _definitions(text: str) -> Iterator[_Link]:
    for match in _DEFINITION.finditer(text):
        raw = match.group(1)
        if raw.startswith("<") and raw.endswith(">"):
            raw = raw[1:-1]
        yield _Link(match.start(), match.end(), _unescape_markdown(raw))


def _autolinks(text: str) -> Iterator[_Link]:
    for match in re.finditer(r"<([A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*)>", text):
        yield _Link(match.start(), match.end(), match.group(1))


class _Attributes(HTMLParser):
    """The attributes of one tag, entities decoded, as a browser reads them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.attrs.extend(attrs)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.attrs.extend(attrs)


def _tag_spans(text: str) -> Iterator[tuple[int, int]]:
    """Start tags as a browser's tokenizer finds them, in one pass: from `<` and a letter to
    the first `>` outside a quoted value; one left open at the end is dropped, as browsers do."""
    i, n = 0, len(text)
    while (i := text.find("<", i)) != -1 and i + 1 < n:
        if not (text[i + 1].isascii() and text[i + 1].isalpha()):
            i += 1
            continue
        j, quote, after_equals = i + 1, "", False
        while j < n:
            char = text[j]
            if quote:
                quote = "" if char == quote else quote
            elif char == ">":
                break
            elif char in "\"'" and after_equals:
                quote, after_equals = char, False
            elif char == "=":
                after_equals = True
            elif char not in " \t\n\r\f":
                after_equals = False
            j += 1
        if j >= n:
            return
        yield i, j + 1
        i = j + 1


def _html_tags(text: str) -> list[_Link]:
    """Each start tag's span and the URLs its attributes load; a `<style>` element's span
    and the URLs of its CSS."""
    found: list[_Link] = []
    for start, end in _tag_spans(text):
        parser = _Attributes()
        parser.feed(text[start:end])
        parser.close()
        found.extend(_Link(start, end, url) for url in _attribute_urls(parser.attrs))
        if re.match(r"<style\b", text[start:end], re.IGNORECASE):
            close = re.compile(r"</style\s*>", re.IGNORECASE).search(text, end)
            stop = close.end() if close else len(text)
            found.extend(_Link(start, stop, url) for url in _css_urls(text[end:stop]))
    return found


def _attribute_urls(attrs: list[tuple[str, str | None]]) -> Iterator[str]:
    for name, value in attrs:
        if value is None:
            continue
        if name in _LIST_ATTRIBUTES:
            for candidate in re.split(r",\s+|,(?=\S*:)|\s+(?=\S)", value):
                yield candidate.strip().split(" ")[0]
        elif name in _URL_ATTRIBUTES:
            yield value
        elif name == "style":
            yield from _css_urls(value)
        elif name == "content":
            yield from (m.group(1) for m in _REFRESH_URL.finditer(value))
        elif name == "srcdoc":
            yield from (link.url for link in _html_tags(value))


def _css_urls(css: str) -> Iterator[str]:
    for match in _CSS_URL.finditer(css):
        yield match.group(2) if match.group(2) is not None else match.group(4)


def _bare(text: str) -> Iterator[_Link]:
    """Bare URLs, in the text as rendered: entities decoded (offsets map back)."""
    decoded, origin = _decode_entities(text)
    for start, url in _bare_urls(decoded):
        yield _Link(origin[start], origin[start + len(url)], url)


def _bare_urls(text: str) -> Iterator[tuple[int, str]]:
    for match in _BARE.finditer(text):
        url = match.group(0).rstrip(_TRAILING)
        if not re.fullmatch(r"(?:https?|ftp):[/\\]*|www\.", url, re.IGNORECASE):
            yield match.start(), url


def _decode_entities(text: str) -> tuple[str, list[int]]:
    """`text` with its HTML entities decoded, and for each decoded index the raw one."""
    pieces: list[str] = []
    origin: list[int] = []
    last = 0
    for match in _ENTITY.finditer(text):
        pieces.append(text[last : match.start()])
        origin.extend(range(last, match.start()))
        value = html.unescape(match.group(0))
        pieces.append(value)
        origin.extend([match.start()] * len(value))
        last = match.end()
    pieces.append(text[last:])
    origin.extend(range(last, len(text) + 1))
    return "".join(pieces), origin


# --- The renderer's view: what a CommonMark renderer with raw HTML would load -------------


class _EveryLink(MarkdownIt):
    """CommonMark with raw HTML, showing every destination (even one markdown-it would
    refuse to link, which another renderer may not) decoded, not percent-encoded."""

    def validateLink(self, url: str) -> bool:
        return True

    def normalizeLink(self, url: str) -> str:
        return url


_MD = _EveryLink("commonmark", {"html": True})


def rendered_destinations(text: str) -> list[str]:
    """Every URL a CommonMark renderer with raw HTML would make of `text`: link and image
    destinations, URL attributes of raw HTML, bare URLs of its text."""
    urls: list[str] = []
    for token in _walk(_MD.parse(text)):
        if token.type == "link_open" or token.type == "image":
            urls.append(str(token.attrGet("href") or token.attrGet("src") or ""))
        elif token.type in ("html_inline", "html_block"):
            urls.extend(link.url for link in _html_tags(token.content))
        elif token.type == "text":
            urls.extend(url for _start, url in _bare_urls(token.content))
    return urls


def _walk(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        if token.children:
            yield from _walk(token.children)

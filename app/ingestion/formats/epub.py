"""EPUB: the package's spine, chapter by chapter (each chapter's XHTML read as HTML).
The container and package files are read with defusedxml; the archive with zip-bomb limits."""

from __future__ import annotations

import posixpath
from urllib.parse import unquote

from app.ingestion.formats import archive
from app.ingestion.formats.base import Block, Budget, Extracted, ExtractionError, Headings
from app.ingestion.formats.html import read_html
from app.ingestion.formats.xml import local, parse


def read(data: bytes, budget: Budget) -> Extracted:
    """The blocks of an e-book, each knowing its chapter."""
    book = archive.check(data)
    container = parse(archive.read(book, "META-INF/container.xml"), "EPUB container")
    rootfile = next(
        (e.get("full-path") for e in container.iter() if local(e.tag) == "rootfile"), None
    )
    if not rootfile:
        raise ExtractionError("The EPUB names no package file.")
    package = parse(archive.read(book, rootfile), "EPUB package")
    folder = posixpath.dirname(rootfile)
    manifest = {
        e.get("id"): (e.get("href") or "", e.get("media-type") or "")
        for e in package.iter()
        if local(e.tag) == "item"
    }
    blocks: list[Block] = []
    chapters = 0
    for itemref in (e for e in package.iter() if local(e.tag) == "itemref"):
        href, media = manifest.get(itemref.get("idref"), ("", ""))
        if not href or "html" not in media or itemref.get("linear") == "no":
            continue  # not text, or outside the reading order (a cover, the contents)
        path = posixpath.normpath(posixpath.join(folder, unquote(href)))
        page = archive.read(book, path).decode("utf-8", "replace")
        chapters += 1
        # A chapter's title is its first heading (or <title>): read once to find it.
        _, title = read_html(page, Budget(None))
        chapter = title or posixpath.basename(path)
        found, _ = read_html(page, budget, Headings(), chapter=chapter)
        blocks += found.blocks
    if not chapters:
        raise ExtractionError("The EPUB's spine has no chapters.")
    return Extracted(blocks, pages=chapters)

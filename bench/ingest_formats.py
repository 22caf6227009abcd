"""Ingestion throughput per format, beside the bare extraction library on the same file.

    python -m bench.ingest_formats [--scale 1] [--rounds 3]

Each format's file is generated here (python-docx, python-pptx, openpyxl, a PDF writer,
hand-built EPUB/ODT zips, the stdlib for CSV, JSON, HTML and e-mail), then read two ways in
the same process: *bare*, the library alone pulling out the text (what any extractor must
do at least), and *product*, `app.ingestion.prepare.prepare` (sniff-typed reader with its
limits, structure, sanitising and structure-keeping chunking). Embedding and indexing cost
the same per chunk whatever the format (bench/ingestion.py measures them). Reported: MB/s
and units/s (pages, slides, rows, chapters, sections) of each, product/bare, and the same
words uploaded as plain text (the pipeline before formats, per MB of the original file). On a
shared 2-core machine the absolute figures mean little; the ratio is the point.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import time
import zipfile
from collections.abc import Callable
from dataclasses import replace
from email.message import EmailMessage
from html.parser import HTMLParser
from typing import Any

from app.ingestion.extract import TEXT, extract_text, sniff
from app.ingestion.prepare import PrepareOptions, prepare
from tests.knowledge.files import make_paged_pdf

SENTENCE = "Annual plans can be refunded within 45 days of purchase, minus any discount used. "


def _docx(n: int) -> tuple[bytes, int]:
    import docx

    document = docx.Document()
    for i in range(n):
        document.add_heading(f"Section {i}", 1)
        document.add_paragraph(SENTENCE * 8)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue(), n


def _bare_docx(data: bytes) -> int:
    import docx

    return sum(len(p.text) for p in docx.Document(io.BytesIO(data)).paragraphs)


def _pptx(n: int) -> tuple[bytes, int]:
    from pptx import Presentation

    deck = Presentation()
    for i in range(n // 4 or 1):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide {i}"
        slide.placeholders[1].text = SENTENCE * 4
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue(), n // 4 or 1


def _bare_pptx(data: bytes) -> int:
    from pptx import Presentation

    deck = Presentation(io.BytesIO(data))
    return sum(
        len(shape.text_frame.text)
        for slide in deck.slides
        for shape in slide.shapes
        if shape.has_text_frame
    )


def _xlsx(n: int) -> tuple[bytes, int]:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["Order", "Customer", "Total", "Note"])
    for i in range(n * 20):
        sheet.append([f"A-{i}", f"customer {i}", i, "paid by card"])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue(), n * 20


def _bare_xlsx(data: bytes) -> int:
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    total = sum(
        len(str(v)) for s in book.worksheets for r in s.iter_rows(values_only=True) for v in r
    )
    book.close()
    return total


def _csv(n: int) -> tuple[bytes, int]:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["order", "customer", "total", "note"])
    for i in range(n * 20):
        writer.writerow([f"A-{i}", f"customer {i}", i, "paid by card"])
    return out.getvalue().encode(), n * 20


def _bare_csv(data: bytes) -> int:
    return sum(len(c) for row in csv.reader(io.StringIO(data.decode())) for c in row)


def _html(n: int) -> tuple[bytes, int]:
    body = "".join(f"<h2>Section {i}</h2><p>{SENTENCE * 8}</p>" for i in range(n))
    return f"<!DOCTYPE html><html><body><h1>Manual</h1>{body}</body></html>".encode(), n


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.chars = 0

    def handle_data(self, data: str) -> None:
        self.chars += len(data)


def _bare_html(data: bytes) -> int:
    parser = _Text()
    parser.feed(data.decode())
    return parser.chars


def _pdf(n: int) -> tuple[bytes, int]:
    pages = max(1, n // 4)
    return make_paged_pdf(*[f"Page {i}. {SENTENCE * 3}" for i in range(pages)]), pages


def _bare_pdf(data: bytes) -> int:
    from pypdf import PdfReader

    return sum(len(p.extract_text() or "") for p in PdfReader(io.BytesIO(data)).pages)


def _epub(n: int) -> tuple[bytes, int]:
    chapters = max(1, n // 10)
    items = "".join(
        f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>'
        for i in range(chapters)
    )
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(chapters))
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        f"<manifest>{items}</manifest><spine>{spine}</spine></package>"
    )
    container = (
        '<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
        '<rootfiles><rootfile full-path="content.opf"/></rootfiles></container>'
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        book.writestr("META-INF/container.xml", container)
        book.writestr("content.opf", opf)
        for i in range(chapters):
            paragraphs = "".join(f"<h2>Part {j}</h2><p>{SENTENCE * 8}</p>" for j in range(10))
            page = (
                '<html xmlns="http://www.w3.org/1999/xhtml"><body>'
                f"<h1>Chapter {i}</h1>{paragraphs}</body></html>"
            )
            book.writestr(f"c{i}.xhtml", page)
    return out.getvalue(), chapters


def _bare_epub(data: bytes) -> int:
    with zipfile.ZipFile(io.BytesIO(data)) as book:
        return sum(
            _bare_html(book.read(name)) for name in book.namelist() if name.endswith(".xhtml")
        )


def _json(n: int) -> tuple[bytes, int]:
    data = {f"topic {i}": {"summary": SENTENCE * 4, "items": list(range(10))} for i in range(n)}
    return json.dumps(data).encode(), n


def _bare_json(data: bytes) -> int:
    return len(json.loads(data))


def _eml(n: int) -> tuple[bytes, int]:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "a@example.com", "b@example.com", "Move"
    message.set_content((SENTENCE * 8 + "\n\n") * n)
    return message.as_bytes(), n


def _bare_eml(data: bytes) -> int:
    from email import message_from_bytes, policy

    message = message_from_bytes(data, policy=policy.default)
    body = message.get_body(preferencelist=("plain",))
    return len(body.get_content()) if body is not None else 0


FORMATS: dict[str, tuple[Callable[[int], tuple[bytes, int]], Callable[[bytes], int]]] = {
    "pdf": (_pdf, _bare_pdf),
    "docx": (_docx, _bare_docx),
    "pptx": (_pptx, _bare_pptx),
    "xlsx": (_xlsx, _bare_xlsx),
    "csv": (_csv, _bare_csv),
    "html": (_html, _bare_html),
    "epub": (_epub, _bare_epub),
    "json": (_json, _bare_json),
    "eml": (_eml, _bare_eml),
}


def _timed(call: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    """Run every format, bare then product, and print one JSON line each."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=int, default=1, help="sections per format x 200")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for name, (make, bare) in FORMATS.items():
        data, units = make(200 * args.scale)
        content_type = sniff(data, None).content_type
        options = PrepareOptions(
            content_type=content_type,
            anonymise=False,
            chunk_tokens=400,
            chunk_overlap=60,
            max_chars=30_000_000,
            max_pages=2000,
        )
        bare_s = _timed(lambda data=data, bare=bare: bare(data), args.rounds)  # type: ignore[misc]
        product_s = _timed(lambda data=data, o=options: prepare(data, o), args.rounds)  # type: ignore[misc]
        chunks = len(prepare(data, options).chunks)
        # The same words as a plain-text upload, through the pipeline as it was before
        # formats: what sanitising and chunking cost without any structure.
        words = extract_text(data, content_type)[0].encode()
        plain = replace(options, content_type=TEXT)
        text_s = _timed(lambda words=words, o=plain: prepare(words, o), args.rounds)  # type: ignore[misc]
        mb = len(data) / 1e6
        print(
            json.dumps(
                {
                    "format": name,
                    "mb": round(mb, 3),
                    "units": units,
                    "chunks": chunks,
                    "bare_mb_s": round(mb / bare_s, 2),
                    "product_mb_s": round(mb / product_s, 2),
                    "bare_units_s": round(units / bare_s, 1),
                    "product_units_s": round(units / product_s, 1),
                    "product_over_bare": round(bare_s / product_s, 2),
                    "same_words_as_text_mb_s": round(mb / text_s, 2),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()

"""Real files of every format Threadline reads, made in the test by the libraries a user's
own tools use (python-docx, python-pptx, openpyxl, the stdlib's csv, json and email; a
small PDF writer; EPUB and ODT zips built by hand as their specifications lay them out).
Each holds one known fact at one known place."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any

from tests.knowledge.files import make_paged_pdf

SEP = " \u203a "


@dataclass(frozen=True)
class Sample:
    """A file, the type it must be read as, a question, the fact's word and its place."""

    name: str
    data: bytes
    content_type: str
    query: str
    fact: str
    location: dict[str, Any]


def _filler(topic: str) -> str:
    # About 250 tokens with no sentence end: one unit, too long to be carried as overlap,
    # so each page is a chunk of its own.
    return " ".join(f"{topic} detail {i}" for i in range(80))


def pdf() -> Sample:
    data = make_paged_pdf(
        "Welcome to the owner manual of the kettle " + _filler("welcome"),
        "Cleaning the kettle needs vinegar and water " + _filler("cleaning"),
        "The quillet warranty lasts 45 days from purchase. " + _filler("warranty"),
    )
    return Sample("manual.pdf", data, "application/pdf", "quillet warranty", "quillet", {"page": 3})


def docx() -> Sample:
    import docx as python_docx

    document = python_docx.Document()
    document.add_heading("Terms of service", 0)
    document.add_heading("2 Payments", 1)
    document.add_paragraph("Invoices are sent on the first day of the month.")
    document.add_heading("3 Refunds", 1)
    document.add_heading("3.2 Annual plans", 2)
    document.add_paragraph("Annual plans get a brindlewick refund within 45 days of purchase.")
    table = document.add_table(rows=3, cols=2)
    for row, cells in zip(
        table.rows, [("Plan", "Refund"), ("Monthly", "none"), ("Annual", "45 days")], strict=True
    ):
        for cell, value in zip(row.cells, cells, strict=True):
            cell.text = value
    out = io.BytesIO()
    document.save(out)
    return Sample(
        "terms.docx",
        out.getvalue(),
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "brindlewick refund",
        "brindlewick",
        {"section": f"Terms of service{SEP}3 Refunds{SEP}3.2 Annual plans"},
    )


def pptx() -> Sample:
    from pptx import Presentation

    deck = Presentation()
    for title, body in (
        ("Quarterly review", "Revenue grew in every region."),
        ("Support hours", "The snorkelpad hotline opens at 7 am on weekdays."),
    ):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    out = io.BytesIO()
    deck.save(out)
    return Sample(
        "review.pptx",
        out.getvalue(),
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "snorkelpad hotline",
        "snorkelpad",
        {"slide": 2, "section": "Support hours"},
    )


def xlsx() -> Sample:
    from openpyxl import Workbook

    book = Workbook()
    intro = book.active
    assert intro is not None
    intro.title = "Intro"
    intro.append(["Prices are in euros."])
    prices = book.create_sheet("Prices")
    prices.append(["Plan", "Price", "Note"])
    prices.append(["Basic", 9, "monthly"])
    prices.append(["Team", 29, "monthly"])
    prices.append(["Gravelmint", 99, "yearly, includes onboarding"])
    out = io.BytesIO()
    book.save(out)
    return Sample(
        "prices.xlsx",
        out.getvalue(),
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "gravelmint price",
        "Gravelmint",
        {"sheet": "Prices", "rows": "1-4"},
    )


def csv_file() -> Sample:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["city", "office", "opening hour"])
    writer.writerow(["Utrecht", "Centraal", "8:00"])
    writer.writerow(["Zwolle", "Plumtree depot", "9:30"])
    return Sample(
        "offices.csv",
        out.getvalue().encode(),
        "text/csv",
        "plumtree depot opening",
        "Plumtree",
        {"rows": "1-3"},
    )


def html() -> Sample:
    page = """<!DOCTYPE html><html><head><title>Handbook</title><script>var x = 1;</script></head>
<body><h1>Handbook</h1><p>Welcome to the team.</p>
<h2>Travel</h2><p>Book trains through the wobblefin portal at least two days ahead.</p>
<table><tr><th>Class</th><th>Allowed</th></tr><tr><td>Second</td><td>always</td></tr></table>
<h2>Equipment</h2><p>Laptops are replaced every three years.</p></body></html>"""
    return Sample(
        "handbook.html",
        page.encode(),
        "text/html",
        "wobblefin portal trains",
        "wobblefin",
        {"section": f"Handbook{SEP}Travel"},
    )


def _zip(members: list[tuple[str, str]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, text in members:
            method = zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED
            archive.writestr(zipfile.ZipInfo(name), text, compress_type=method)
    return out.getvalue()


def _chapter(title: str, text: str) -> str:
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>'
        f"{title}</title></head><body><h1>{title}</h1><p>{text}</p></body></html>"
    )


def epub() -> Sample:
    opf = """<?xml version="1.0" encoding="utf-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Cellar book</dc:title>
<dc:identifier id="id">cellar</dc:identifier><dc:language>en</dc:language></metadata>
<manifest><item id="c1" href="one.xhtml" media-type="application/xhtml+xml"/>
<item id="c2" href="two.xhtml" media-type="application/xhtml+xml"/></manifest>
<spine><itemref idref="c1"/><itemref idref="c2"/></spine></package>"""
    container = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>
</rootfiles></container>"""
    data = _zip(
        [
            ("mimetype", "application/epub+zip"),
            ("META-INF/container.xml", container),
            ("OEBPS/content.opf", opf),
            ("OEBPS/one.xhtml", _chapter("Chapter One: Grapes", "Harvest starts in September.")),
            (
                "OEBPS/two.xhtml",
                _chapter("Chapter Two: Storage", "Keep the tumblecork bottles at 12 degrees."),
            ),
        ]
    )
    title = "Chapter Two: Storage"
    return Sample(
        "cellar.epub",
        data,
        "application/epub+zip",
        "tumblecork bottles",
        "tumblecork",
        {"chapter": title, "section": title},
    )


def eml() -> Sample:
    message = EmailMessage()
    message["From"] = "Facilities <facilities@example.com>"
    message["To"] = "staff@example.com"
    message["Subject"] = "Office move"
    message["Date"] = "Mon, 23 Nov 2026 09:00:00 +0000"
    message.set_content("We move to the new building next month. Details attached.")
    message.add_attachment(
        "The frostwhistle parking garage opens on 1 December.",
        subtype="plain",
        filename="parking.txt",
    )
    return Sample(
        "move.eml",
        message.as_bytes(),
        "message/rfc822",
        "frostwhistle parking",
        "frostwhistle",
        {"section": f"Office move{SEP}parking.txt"},
    )


def json_file() -> Sample:
    data = {
        "service": {"name": "Threadline", "region": "eu"},
        "limits": {"uploads": {"max_mb": 25, "note": "the dapplequill quota resets monthly"}},
    }
    return Sample(
        "config.json",
        json.dumps(data, indent=2).encode(),
        "application/json",
        "dapplequill quota",
        "dapplequill",
        {"section": "limits"},
    )


def odt() -> Sample:
    content = """<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" office:version="1.3">
<office:body><office:text>
<text:h text:outline-level="1">Safety</text:h>
<text:p>Wear the marrowleaf goggles in the workshop.</text:p>
<text:h text:outline-level="1">Cleaning</text:h>
<text:p>Sweep the floor every evening.</text:p>
</office:text></office:body></office:document-content>"""
    manifest = """<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest
 xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">
<manifest:file-entry manifest:full-path="/"
 manifest:media-type="application/vnd.oasis.opendocument.text"/>
<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>
</manifest:manifest>"""
    data = _zip(
        [
            ("mimetype", "application/vnd.oasis.opendocument.text"),
            ("content.xml", content),
            ("META-INF/manifest.xml", manifest),
        ]
    )
    return Sample(
        "workshop.odt",
        data,
        "application/vnd.oasis.opendocument.text",
        "marrowleaf goggles",
        "marrowleaf",
        {"section": "Safety"},
    )


SAMPLES = {
    "pdf": pdf,
    "docx": docx,
    "pptx": pptx,
    "xlsx": xlsx,
    "csv": csv_file,
    "html": html,
    "epub": epub,
    "eml": eml,
    "json": json_file,
    "odt": odt,
}

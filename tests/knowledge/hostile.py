"""Hostile files for issue 29 item 7, built here (never downloaded): zip bombs in every zip
container, XML entities, a macro-enabled document, a spreadsheet claiming a million empty
cells, deeply nested HTML and PDFs whose page tree lies. The tests and
`bench/hostile_files.py` upload the same bytes."""

from __future__ import annotations

import io
import zipfile

from tests.knowledge.files import pdf_file
from tests.knowledge.format_files import SAMPLES


def replace_member(
    data: bytes, name: str, body: bytes, extra: dict[str, bytes] | None = None
) -> bytes:
    """A copy of a zip container with one member's body replaced (and members added)."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as copy:
        for member in source.infolist():
            copy.writestr(member.filename, body if member.filename == name else source.read(member))
        for added, content in (extra or {}).items():
            copy.writestr(added, content)
    return out.getvalue()


BOMB = b"<?xml version='1.0'?><x>" + b" " * (8 * 1024 * 1024) + b"</x>"
"""8 MB that deflates to a few kilobytes: a ratio no document part has."""

BOMB_MEMBERS = {
    "docx": "word/document.xml",
    "xlsx": "xl/worksheets/sheet2.xml",
    "pptx": "ppt/slides/slide1.xml",
    "epub": "OEBPS/two.xhtml",
    "odt": "content.xml",
}
"""The part of each zip container's sample that the bomb replaces."""


def zip_bomb(kind: str) -> bytes:
    """The `kind` sample (docx, xlsx, pptx, epub, odt) with one part a zip bomb."""
    return replace_member(SAMPLES[kind]().data, BOMB_MEMBERS[kind], BOMB)


LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + b"".join(
        b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
        for i in range(1, 10)
    )
    + b"]>"
)
"""A billion laughs: nine levels of ten entities each."""


def laughing_odt() -> bytes:
    """An ODT whose content is a billion laughs."""
    laughs = LAUGHS + (
        b'<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0">'
        b"<office:body><office:text>&lol9;</office:text></office:body></office:document-content>"
    )
    return replace_member(SAMPLES["odt"]().data, "content.xml", laughs)


def external_entity_epub() -> bytes:
    """An EPUB whose container names its root file through an external entity."""
    external = (
        b'<?xml version="1.0"?><!DOCTYPE c [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b'<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
        b'<rootfile full-path="&x;"/></rootfiles></container>'
    )
    return replace_member(SAMPLES["epub"]().data, "META-INF/container.xml", external)


def macro_docx() -> bytes:
    """The DOCX sample declared macro-enabled, with a VBA project beside its text."""
    docx = SAMPLES["docx"]().data
    types = zipfile.ZipFile(io.BytesIO(docx)).read("[Content_Types].xml")
    macro = types.replace(
        b"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml",
        b"application/vnd.ms-word.document.macroEnabled.main+xml",
    )
    return replace_member(
        docx,
        "[Content_Types].xml",
        macro,
        {"word/vbaProject.bin": b'\xd0\xcf\x11\xe0 Sub AutoOpen() Shell("calc") End Sub'},
    )


def million_empty_cells() -> bytes:
    """A workbook whose sheet claims every column (A1:XFD1048576): each row it has is read
    as 16,384 cells, nearly all empty."""
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["a", "b"])
    out = io.BytesIO()
    book.save(out)
    rows = "".join(
        f'<row r="{i}"><c r="A{i}" t="inlineStr"><is><t>x</t></is></c></row>' for i in range(1, 101)
    )
    sheet_xml = (
        '<?xml version="1.0" encoding="UTF-8"?><worksheet '
        'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
        f'<dimension ref="A1:XFD1048576"/><sheetData>{rows}</sheetData></worksheet>'
    )
    return replace_member(out.getvalue(), "xl/worksheets/sheet1.xml", sheet_xml.encode())


DEEP_HTML = b"<!DOCTYPE html><html><body>" + b"<div>" * 50_000 + b"deep" + b"</div>" * 50_000


# PDFs whose page tree lies. Object 1 is the catalog, 2 the root /Pages node, 3 the one real
# page, 4 its content ("quillet page"), 5 its font; what follows is the lie.
_CATALOG = b"<< /Type /Catalog /Pages 2 0 R >>"
_PAGE = (
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
    b"/Resources << /Font << /F1 5 0 R >> >> >>"
)
_TEXT = b"BT /F1 12 Tf 72 720 Td (quillet page) Tj ET"
_CONTENT = b"<< /Length %d >>\nstream\n" % len(_TEXT) + _TEXT + b"\nendstream"
_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def _lying_pdf(root: bytes, *more: bytes) -> bytes:
    return pdf_file([_CATALOG, root, _PAGE, _CONTENT, _FONT, *more])


def _chain(depth: int) -> bytes:
    """Objects 6.. are /Pages nodes each the only kid of the one before: `depth` deep."""
    nodes = [b"<< /Type /Pages /Kids [%d 0 R] /Count 1 >>" % (7 + i) for i in range(depth - 1)]
    return _lying_pdf(b"<< /Type /Pages /Kids [6 0 R] /Count 1 >>", *nodes, _last(3))


def _last(kid: int) -> bytes:
    return b"<< /Type /Pages /Kids [%d 0 R] /Count 1 >>" % kid


def _doubling(levels: int) -> bytes:
    """Objects 6.. are /Pages nodes each naming the next twice: 2**levels leaves, all the
    one real page, from a file of a few hundred bytes."""
    nodes = [
        b"<< /Type /Pages /Kids [%d 0 R %d 0 R] /Count 1 >>" % (7 + i, 7 + i)
        for i in range(levels - 1)
    ]
    return _lying_pdf(
        b"<< /Type /Pages /Kids [6 0 R] /Count 1 >>",
        *nodes,
        b"<< /Type /Pages /Kids [3 0 R 3 0 R] /Count 2 >>",
    )


LYING_PDFS: dict[str, tuple[bytes, str | None]] = {
    "count-above-its-pages": (
        _lying_pdf(b"<< /Type /Pages /Kids [3 0 R] /Count 1000000000 >>"),
        None,
    ),
    "own-kid": (
        _lying_pdf(b"<< /Type /Pages /Kids [3 0 R 2 0 R] /Count 2 >>"),
        "cyclic page references",
    ),
    "cycle": (
        _lying_pdf(
            b"<< /Type /Pages /Kids [3 0 R 6 0 R] /Count 2 >>",
            b"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R] /Count 1 >>",
        ),
        "cyclic page references",
    ),
    "kids-not-pages": (
        _lying_pdf(b"<< /Type /Pages /Kids [3 0 R 5 0 R 1 0 R 42 (x) 99 0 R] /Count 5 >>"),
        None,
    ),
    "5000-deep": (_chain(5_000), "page tree depth"),
    "billion-shared-leaves": (_doubling(30), "page tree entry limit"),
    "no-pages": (
        _lying_pdf(b"<< /Type /Pages /Count 5 >>"),
        "has no pages",
    ),
}
"""Each lying PDF (a /Count of a billion over one page; a node that is its own kid; a cycle
through another node; kids that are a font, the catalog, a number, a string and a missing
object; 5,000 nested nodes; 30 nodes each naming the next twice, 2**30 leaves; a /Count
with no kids) and the reason it fails with (None: it is read, its one real page only)."""

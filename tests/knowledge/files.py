"""Small real files for ingestion tests."""

from __future__ import annotations


def make_pdf(*lines: str) -> bytes:
    """A minimal, valid one-page PDF with the lines as text (Helvetica)."""
    body = " ".join(f"({line}) Tj 0 -16 Td" for line in lines)
    stream = f"BT /F1 12 Tf 72 720 Td {body} ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return pdf_file(objects)


CORRUPT_PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R >> endobj\ngarbage\n%%EOF"


def make_paged_pdf(*pages: str) -> bytes:
    """A valid PDF with one page per argument, each holding that line of text."""
    return make_lined_pdf(*([line] for line in pages))


def pdf_file(objects: list[bytes]) -> bytes:
    """The numbered objects as a PDF file, with its cross-reference table."""
    out = b"%PDF-1.4\n"
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out


def make_lined_pdf(*pages: list[str]) -> bytes:
    """A valid PDF with one page per argument, each holding those lines of text."""
    count = len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(count))
    font = 3 + 2 * count
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
    ]
    for i, lines in enumerate(pages):
        body = " ".join(f"({line}) Tj 0 -16 Td" for line in lines)
        stream = f"BT /F1 12 Tf 72 720 Td {body} ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return pdf_file(objects)


def with_bookmarks(pdf: bytes, bookmarks: list[tuple[str, int, str | None]]) -> bytes:
    """The PDF with an outline: each bookmark (title, 0-based page, parent title or None),
    written by pypdf as a PDF producer would."""
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    made: dict[str, object] = {}
    for title, page, parent in bookmarks:
        made[title] = writer.add_outline_item(
            title=title,
            page_number=page,
            parent=made[parent] if parent else None,  # type: ignore[arg-type]
        )
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()

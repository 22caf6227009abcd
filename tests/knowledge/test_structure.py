"""Issue 29: chunking keeps a document's structure. A chunk never crosses a heading (a
heading with no text of its own goes with the section under it), a table's chunks each
repeat its header row and keep their row range, lists and code blocks stay whole where
they fit, and a passage over two pages says so."""

from __future__ import annotations

import io

from app.ingestion.formats.read import extract
from app.ingestion.formats.types import CSV, DOCX, MARKDOWN, PDF, XLSX
from app.ingestion.prepare import PrepareOptions, prepare
from app.ingestion.structure import chunk_blocks
from tests.knowledge.files import make_lined_pdf, make_paged_pdf, with_bookmarks

SEP = " \u203a "


def _chunks(data: bytes, content_type: str, tokens: int = 120, overlap: int = 20) -> list:  # type: ignore[type-arg]
    options = PrepareOptions(
        content_type=content_type,
        anonymise=False,
        chunk_tokens=tokens,
        chunk_overlap=overlap,
        max_chars=10_000_000,
        max_pages=100,
    )
    return prepare(data, options).chunks


def test_markdown_chunks_never_cross_a_heading_and_keep_code_and_lists_whole() -> None:
    code = "\n".join(f"    step_{i}()" for i in range(12))
    text = (
        "# Guide\n\n## Install\n\nRun the installer once.\n\n"
        f"```python\ndef install():\n{code}\n```\n\n"
        "## Use\n\n- open the app\n- pick a file\n- press start\n\n"
        + "Long prose sentence about usage. " * 40
        + "\n\n## Remove\n\nDelete the folder.\n"
    )
    chunks = _chunks(text.encode(), MARKDOWN)
    sections = [c.location["section"] for c in chunks]
    assert sections[0] == f"Guide{SEP}Install"  # `# Guide` has no text: it goes with Install
    assert f"Guide{SEP}Remove" in sections
    for chunk in chunks:  # no chunk holds text of two sections
        held = [
            s for s in ("Run the installer", "open the app", "Delete the folder") if s in chunk.text
        ]
        assert len(held) <= 1, chunk.text
    (with_code,) = [c for c in chunks if "def install" in c.text]
    assert f"def install():\n{code}\n```" in with_code.text  # whole, lines intact
    (with_list,) = [c for c in chunks if "open the app" in c.text]
    assert "- open the app\n- pick a file\n- press start" in with_list.text
    assert len([c for c in chunks if c.location["section"] == f"Guide{SEP}Use"]) >= 2


def test_every_chunk_of_a_sheet_repeats_its_header_and_knows_its_rows() -> None:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Orders"
    sheet.append(["Order", "Customer", "Total"])
    for i in range(2, 302):
        sheet.append([f"A-{i}", f"customer {i}", i * 10])
    out = io.BytesIO()
    book.save(out)
    chunks = _chunks(out.getvalue(), XLSX)
    assert len(chunks) > 5
    covered: list[int] = []
    for chunk in chunks:
        lines = chunk.text.splitlines()
        assert lines[0] == "| Order | Customer | Total |", chunk.text
        assert chunk.location["sheet"] == "Orders"
        first, _, last = chunk.location["rows"].partition("-")
        numbers = [int(line.split("|")[1].strip()[2:]) for line in lines[1:]]
        assert numbers == list(range(max(2, int(first)), int(last or first) + 1))
        covered += numbers
    assert covered == list(range(2, 302))  # every row once, no overlap, in order


def test_a_csv_table_is_rows_not_word_soup() -> None:
    text = "name;city\n" + "".join(f"person {i};town {i}\n" for i in range(60))
    chunks = _chunks(text.encode(), CSV, tokens=80)
    assert all(c.text.startswith("| name | city |") for c in chunks)
    assert chunks[-1].location["rows"].endswith("-61")


def test_a_word_table_keeps_its_rows_under_its_heading() -> None:
    import docx

    document = docx.Document()
    document.add_heading("Fees", 1)
    table = document.add_table(rows=3, cols=3)
    for row, cells in zip(
        table.rows,
        [("Plan", "Fee", "Period"), ("Basic", "9", "month"), ("Pro", "99", "year")],
        strict=True,
    ):
        for cell, value in zip(row.cells, cells, strict=True):
            cell.text = value
    out = io.BytesIO()
    document.save(out)
    (chunk,) = _chunks(out.getvalue(), DOCX)
    assert "| Plan | Fee | Period |\n| Basic | 9 | month |\n| Pro | 99 | year |" in chunk.text
    assert chunk.location == {"section": "Fees"}


def test_a_passage_over_two_pages_knows_both() -> None:
    data = make_paged_pdf("The first page ends mid-topic.", "The second page goes on.")
    (chunk,) = _chunks(data, PDF)
    assert chunk.location == {"page": 1, "page_end": 2}
    assert extract(data, PDF).pages == 2


def test_plain_blocks_chunk_as_before() -> None:
    from app.ingestion.formats.base import Block

    assert chunk_blocks([]) == []
    (chunk,) = chunk_blocks([Block("text", "One."), Block("text", "Two.")])
    assert (chunk.text, chunk.location) == ("One.\nTwo.", {})


def test_a_pdfs_bookmarks_are_its_headings_and_its_chunks_sections() -> None:
    """A PDF's outline gives its section paths: a bookmark's title on a line of its page is
    a heading there (the text before it stays in the section before), a numbered line
    matches its bookmark, and a section goes on over the next page."""
    pdf = make_lined_pdf(
        [
            "Refund policy",
            "Refunds keep customers with us.",
            "3 Refunds",
            "A refund request goes to billing with the order number.",
        ],
        ["3.2 Annual plans", "Annual plans are refunded pro rata within 45 days."],
        ["Monthly plans renew on the first day of each month."],
    )
    outlined = with_bookmarks(
        pdf,
        [("Refunds", 0, None), ("Annual plans", 1, "Refunds"), ("Monthly plans", 2, "Refunds")],
    )
    chunks = _chunks(outlined, PDF, tokens=30, overlap=0)
    where = {c.text.splitlines()[-1]: c.location for c in chunks}
    assert where["Refunds keep customers with us."] == {"page": 1}
    assert where["A refund request goes to billing with the order number."] == {
        "page": 1,
        "section": "Refunds",
    }
    assert where["Annual plans are refunded pro rata within 45 days."] == {
        "page": 2,
        "section": f"Refunds{SEP}Annual plans",
    }
    # No line of page 3 is its bookmark's title: the section opens where the page begins.
    assert where["Monthly plans renew on the first day of each month."] == {
        "page": 3,
        "section": f"Refunds{SEP}Monthly plans",
    }
    # The same file without an outline: pages only, as before.
    assert all("section" not in c.location for c in _chunks(pdf, PDF, tokens=30, overlap=0))


def test_a_broken_or_huge_outline_never_fails_the_text() -> None:
    pdf = make_lined_pdf(["Alpha line of text here."], ["Beta line of text here."])
    many = with_bookmarks(pdf, [(f"Mark {i}", i % 2, None) for i in range(300)])
    chunks = _chunks(many, PDF)
    assert "Alpha line of text here." in chunks[0].text
    assert extract(many, PDF).pages == 2

"""`threadline ingest` titles a document as people would: a Markdown or text file by its
first top-level heading (issue 28, item 9: sources were listed under file slugs)."""

from __future__ import annotations

from pathlib import Path

from app.cli.ingest import title_of


def test_a_markdown_file_is_titled_by_its_first_heading() -> None:
    raw = b"Intro line\n\n## Not this one\n# Your data and privacy #\n\nText.\n# Later\n"
    assert title_of(raw, Path("kb/data-and-privacy.md")) == "Your data and privacy"


def test_without_a_heading_or_for_other_formats_the_file_name_is_the_title() -> None:
    assert title_of(b"Just text.\n", Path("kb/notes.txt")) == "notes"
    assert title_of(b"#hashtag, not a heading\n", Path("kb/tags.md")) == "tags"
    assert title_of(b"%PDF-1.7\n# not markdown\n", Path("kb/report.pdf")) == "report"

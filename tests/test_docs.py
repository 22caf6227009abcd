"""The README stays short, and every relative link in the README and docs/ leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_MAX_BYTES = 10_240

FENCED_BLOCK = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", flags=re.MULTILINE)


def markdown_files() -> list[Path]:
    """The documents whose links are checked: the README and everything under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def link_targets(text: str) -> list[str]:
    """The targets of the markdown links in `text`, ignoring code blocks and code spans."""
    prose = INLINE_CODE.sub("", FENCED_BLOCK.sub("", text))
    return LINK.findall(prose)


def anchors(text: str) -> set[str]:
    """The heading anchors GitHub generates for `text` (lower case, punctuation dropped)."""
    prose = FENCED_BLOCK.sub("", text)
    slugs = set()
    for heading in HEADING.findall(prose):
        plain = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
        slugs.add(re.sub(r"[^\w\- ]", "", plain).replace(" ", "-"))
    return slugs


def is_relative(target: str) -> bool:
    """Whether `target` is a path in this repository rather than a URL with a scheme."""
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.IGNORECASE)


def test_link_targets_skip_code_and_keep_fragments() -> None:
    text = (
        "See [the API](docs/api.md#errors) and [site](https://example.org).\n"
        "`[not](a-link.md)`\n```\n[nor](this.md)\n```\n[dir](docs/adr/)\n"
    )
    assert link_targets(text) == ["docs/api.md#errors", "https://example.org", "docs/adr/"]
    assert anchors("# Data rights: export, erasure, audit\n") == {
        "data-rights-export-erasure-audit"
    }


def test_readme_stays_under_ten_kilobytes() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size < README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/"


def test_every_relative_link_in_the_readme_and_docs_points_to_something_that_exists() -> None:
    broken = []
    for document in markdown_files():
        text = document.read_text()
        for target in filter(is_relative, link_targets(text)):
            path, _, fragment = target.partition("#")
            linked = (document.parent / path).resolve() if path else document
            if not linked.exists():
                broken.append(f"{document.relative_to(ROOT)}: {target}")
            elif (
                fragment and linked.suffix == ".md" and fragment not in anchors(linked.read_text())
            ):
                broken.append(f"{document.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []

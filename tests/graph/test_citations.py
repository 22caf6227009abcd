from __future__ import annotations

from app.conversation.pipeline.citations import check_citations
from app.conversation.turn.types import SourceRef


def source(n: int) -> SourceRef:
    return SourceRef(n=n, id=f"c{n}", kind="kb", source_id="d", title="t", score=1.0, text="x")


def test_valid_citations_are_kept_and_dangling_ones_removed_and_counted() -> None:
    checked = check_citations("A [1]. B [2, 5]. C [9].", [source(1), source(2)])
    assert checked.text == "A [1]. B [2]. C."
    assert checked.cited == [1, 2]
    assert checked.removed == 2


def test_an_answer_without_citations_is_unchanged() -> None:
    checked = check_citations("No sources needed.", [])
    assert (checked.text, checked.cited, checked.removed) == ("No sources needed.", [], 0)

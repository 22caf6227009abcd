"""Which stored turns go in verbatim, and which are due to be folded into the summary."""

from __future__ import annotations

from app.graph.nodes.load_history import merge_client_history, split_window
from app.turns.types import ChatMessage, HistoryTurn


def turns(first: int, last: int) -> list[HistoryTurn]:
    return [
        HistoryTurn(turn_id=str(i), user_query=f"q{i}", answer=f"a{i}", status="complete")
        for i in range(first, last)
    ]


def ids(items: list[HistoryTurn]) -> list[str]:
    return [t["turn_id"] for t in items]


def test_a_short_session_is_all_window() -> None:
    window, fold, fetch = split_window(turns(0, 3), total=3, limit=10, summarized=0)
    assert ids(window) == ["0", "1", "2"]
    assert (fold, fetch) == ([], None)


def test_the_window_is_the_newest_turns_and_the_older_cached_ones_are_folded() -> None:
    window, fold, fetch = split_window(turns(5, 20), total=20, limit=10, summarized=8)
    assert ids(window) == [str(i) for i in range(10, 20)]
    assert ids(fold) == ["8", "9"]
    assert fetch is None


def test_turns_the_summary_covers_are_not_repeated() -> None:
    window, fold, fetch = split_window(turns(0, 8), total=8, limit=10, summarized=5)
    assert ids(window) == ["5", "6", "7"]
    assert (fold, fetch) == ([], None)


def test_turns_older_than_the_cache_are_fetched() -> None:
    window, fold, fetch = split_window(turns(35, 50), total=50, limit=10, summarized=0)
    assert ids(window) == [str(i) for i in range(40, 50)]
    assert fold == []
    assert fetch == (0, 40)


def test_client_messages_already_stored_are_not_duplicated() -> None:
    stored = turns(0, 2)
    client = [
        ChatMessage(role="user", content="q1"),
        ChatMessage(role="assistant", content="a1"),
        ChatMessage(role="user", content="new question"),
        ChatMessage(role="assistant", content="new answer"),
    ]
    merged = merge_client_history(stored, client)
    assert [t["user_query"] for t in merged] == ["q0", "q1", "new question"]
    assert merged[-1]["answer"] == "new answer"

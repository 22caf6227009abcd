"""Which stored turns go in verbatim, and which are due to be folded into the summary."""

from __future__ import annotations

from app.conversation.pipeline.nodes.load_history import merge_client_history, split_window
from app.conversation.turn.types import ChatMessage, HistoryTurn


def turns(first: int, last: int) -> list[HistoryTurn]:
    return [
        HistoryTurn(turn_id=str(i), user_query=f"q{i}", answer=f"a{i}", status="complete")
        for i in range(first, last)
    ]


def ids(items: list[HistoryTurn]) -> list[str]:
    return [t["turn_id"] for t in items]


def test_a_short_session_is_all_history() -> None:
    uncovered, awaiting = split_window(turns(0, 3), total=3, limit=10, summarized=0)
    assert ids(uncovered) == ["0", "1", "2"]
    assert awaiting == 0


def test_every_turn_the_summary_does_not_cover_goes_in_not_only_the_window() -> None:
    """The summary is folded in the background, a batch at a time: between two folds the
    turns that left the window are still read verbatim — none is lost meanwhile."""
    uncovered, awaiting = split_window(turns(5, 20), total=20, limit=10, summarized=8)
    assert ids(uncovered) == [str(i) for i in range(8, 20)]
    assert awaiting == 0


def test_turns_the_summary_covers_are_not_repeated() -> None:
    uncovered, awaiting = split_window(turns(0, 8), total=8, limit=10, summarized=5)
    assert ids(uncovered) == ["5", "6", "7"]
    assert awaiting == 0


def test_uncovered_turns_older_than_the_cache_wait_for_the_fold() -> None:
    """A fold far behind (its model down for a while): the turn does not fetch the old turns;
    it counts them, and the manifest says they wait for the background summary."""
    uncovered, awaiting = split_window(turns(35, 50), total=50, limit=10, summarized=0)
    assert ids(uncovered) == [str(i) for i in range(35, 50)]
    assert awaiting == 35


def test_no_history_window_means_no_history() -> None:
    assert split_window([], total=12, limit=0, summarized=5) == ([], 0)


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

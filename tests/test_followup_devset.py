"""The follow-up dev set (bench/data/followups) is well formed: ids, labels and gold documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "bench" / "data" / "followups"
LABELS = {"follow_up", "clarification", "topic_switch"}


def _lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text("utf-8").splitlines() if line]


def test_documents_have_unique_ids_titles_and_text() -> None:
    documents = _lines("documents.jsonl")
    ids = [d["id"] for d in documents]
    assert len(ids) == len(set(ids)) and len(ids) == 206
    assert all(set(d) == {"id", "domain", "title", "text"} for d in documents)
    assert all(d["title"].strip() and d["text"].strip() for d in documents)
    assert len({d["domain"] for d in documents}) == 4


def test_conversations_are_labelled_and_every_gold_document_exists() -> None:
    ids = {d["id"] for d in _lines("documents.jsonl")}
    conversations = _lines("conversations.jsonl")
    assert len(conversations) == 135
    assert len({c["id"] for c in conversations}) == len(conversations)
    seen: dict[str, dict[str, int]] = {"base": {}, "hard": {}, "hard2": {}}
    for conversation in conversations:
        turns = conversation["turns"]
        assert 3 <= len(turns) <= 5, conversation["id"]
        assert turns[0]["label"] is None, conversation["id"]
        for turn in turns:
            assert turn["text"].strip()
            assert 1 <= len(turn["gold"]) <= 2 and set(turn["gold"]) <= ids, turn
        counts = seen[conversation.get("part", "base")]
        for turn in turns[1:]:
            assert turn["label"] in LABELS, turn
            counts[turn["label"]] = counts.get(turn["label"], 0) + 1
    # the counts the README states: the base part (c01-c44, then c45-c69 added for a semantic
    # embedder) and the hard parts (c70-c120, c121-c135), each written before any run on it
    assert seen["base"] == {"follow_up": 126, "clarification": 16, "topic_switch": 47}
    assert seen["hard"] == {"follow_up": 126, "clarification": 9, "topic_switch": 30}
    assert seen["hard2"] == {"follow_up": 43, "clarification": 3, "topic_switch": 6}
    assert [c["id"] for c in conversations] == [f"c{n:02d}" for n in range(1, 136)]
    assert [c.get("part", "base") for c in conversations] == ["base"] * 69 + ["hard"] * 51 + [
        "hard2"
    ] * 15


def test_every_document_of_the_hard_parts_is_gold_somewhere_but_three_distractors() -> None:
    """The hard parts' documents were written for their conversations; only three members of
    hard2's large families (what makes them larger than k) are gold for no turn."""
    added = [d["id"] for d in _lines("documents.jsonl")][102:]
    gold = {
        doc
        for c in _lines("conversations.jsonl")
        if c.get("part") in ("hard", "hard2")
        for turn in c["turns"]
        for doc in turn["gold"]
    }
    assert len(added) == 104
    assert set(added) - gold == {"enc-47", "enc-49", "fin-48"}

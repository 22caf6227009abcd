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
    assert len(ids) == len(set(ids)) and 60 <= len(ids) <= 120
    assert all(set(d) == {"id", "domain", "title", "text"} for d in documents)
    assert all(d["title"].strip() and d["text"].strip() for d in documents)
    assert len({d["domain"] for d in documents}) == 4


def test_conversations_are_labelled_and_every_gold_document_exists() -> None:
    ids = {d["id"] for d in _lines("documents.jsonl")}
    conversations = _lines("conversations.jsonl")
    assert 30 <= len(conversations) <= 50
    assert len({c["id"] for c in conversations}) == len(conversations)
    seen: set[str] = set()
    for conversation in conversations:
        turns = conversation["turns"]
        assert 3 <= len(turns) <= 5, conversation["id"]
        assert turns[0]["label"] is None, conversation["id"]
        for turn in turns:
            assert turn["text"].strip()
            assert 1 <= len(turn["gold"]) <= 2 and set(turn["gold"]) <= ids, turn
        for turn in turns[1:]:
            assert turn["label"] in LABELS, turn
            seen.add(turn["label"])
    assert seen == LABELS

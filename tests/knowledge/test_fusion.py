"""Fusion of the dense and lexical legs (app/retrieval/fusion.py), on hand-made rankings."""

from __future__ import annotations

from dataclasses import dataclass

from app.retrieval.fusion import fuse


@dataclass(frozen=True)
class H:
    chunk_id: str
    document_key: str
    score: float


DENSE = [H("a1", "A", 0.90), H("b1", "B", 0.60), H("c1", "C", 0.55), H("a2", "A", 0.50)]
LEXICAL = [H("c1", "C", 30.0), H("a1", "A", 29.0), H("d1", "D", 4.0), H("b1", "B", 3.0)]
EVEN = {"dense": 1.0, "lexical": 1.0}


def ids(**kwargs: object) -> list[str]:
    legs = {"dense": DENSE, "lexical": LEXICAL}
    options: dict[str, object] = {"method": "zscore", "rrf_k": 60, "limit": 10, **kwargs}
    return [f.chunk_id for f in fuse(legs, EVEN, **options)]  # type: ignore[arg-type]


def test_zscore_keeps_how_far_apart_the_candidates_are() -> None:
    # A and C lead both legs by a wide margin; B is a distant second in dense, D and B trail
    # in lexical. Reciprocal rank would put B (ranks 2 and 4) close to C (ranks 3 and 1).
    ranked = ids()
    assert ranked[:2] == ["a1", "c1"]
    assert set(ranked[2:4]) == {"b1", "d1"}


def test_each_document_first_with_its_best_chunk_then_second_chunks() -> None:
    ranked = ids()
    assert ranked.index("a2") == len(ranked) - 1  # A's second chunk after every other document
    assert ids(limit=3) == ranked[:3]


def test_a_document_missing_from_a_leg_counts_as_that_legs_weakest() -> None:
    fused = fuse({"dense": DENSE, "lexical": LEXICAL}, EVEN, method="zscore", rrf_k=60, limit=10)
    scores = {f.chunk_id: f.score for f in fused}
    assert scores["d1"] < scores["c1"]  # D: fine lexically, absent from dense
    assert scores["a1"] > scores["b1"]


def test_weights_shift_the_balance_between_legs() -> None:
    lexical_only = fuse(
        {"dense": DENSE, "lexical": LEXICAL},
        {"dense": 0.0, "lexical": 1.0},
        method="zscore",
        rrf_k=60,
        limit=4,
    )
    assert [f.chunk_id for f in lexical_only][:2] == ["c1", "a1"]


def test_rrf_remains_available() -> None:
    ranked = ids(method="rrf")
    # a1: 1/61 + 1/62; c1: 1/63 + 1/61 - a1 first, then c1, then b1 (1/62 + 1/64).
    assert ranked[:3] == ["a1", "c1", "b1"]


def test_a_leg_with_one_match_lifts_it_instead_of_saying_nothing() -> None:
    # One document holds the rare word: its lexical leg has a single candidate. Counting the
    # documents it did not return as "its weakest" would give them all the same z-score.
    dense = [H("a1", "A", 0.50), H("b1", "B", 0.49), H("j1", "J", 0.48), H("c1", "C", 0.47)]
    lexical = [H("j1", "J", 7.0)]
    fused = fuse({"dense": dense, "lexical": lexical}, EVEN, method="zscore", rrf_k=60, limit=4)
    assert [f.chunk_id for f in fused] == ["a1", "j1", "b1", "c1"]

"""The turn's queries and their weights (app/conversation/pipeline/query_plan.py), and their fusion
(app/retrieval/multi_query.py), on hand-made rankings."""

from __future__ import annotations

from app.conversation.pipeline.query_plan import (
    WEIGHTING,
    cited_weight,
    depends_on_history,
    history_query,
    history_weight,
    plan_queries,
    relatedness,
    thread,
)
from app.conversation.turn.types import HistoryTurn
from app.retrieval.base import Hit, Passage
from app.retrieval.fusion import fuse
from app.retrieval.multi_query import CITED, fuse_queries

LEGS = {"dense": 1.0, "lexical": 1.0}


def turn(query: str, answer: str = "See the sources [1].") -> HistoryTurn:
    return HistoryTurn(turn_id="t", user_query=query, answer=answer, status="complete")


def hit(document: str, score: float, chunk: int = 1) -> Hit:
    passage = Passage(f"{document}{chunk}", "kb", document, document, "text", score)
    return Hit(passage, None)


def legs(*documents: str) -> dict[str, list[Hit]]:
    """Both legs rank the documents in this order, by a wide margin for the first."""
    dense = [hit(d, 0.9 - 0.1 * i) for i, d in enumerate(documents)]
    lexical = [hit(d, 20.0 - 5 * i) for i, d in enumerate(documents)]
    return {"dense": dense, "lexical": lexical}


def ranked(result_hits: list[Hit]) -> list[str]:
    return [h.passage.source_id for h in result_hits]


PASSPORT = turn("How do I renew my passport?", "Online, with a new photo [1].")


def test_a_first_turn_searches_with_the_question_alone() -> None:
    related = relatedness("How do I renew my passport?", [])
    assert related.score == 0
    assert not depends_on_history(related)
    queries = plan_queries("How do I renew my passport?", [], related)
    assert [(q.name, q.text, q.weight) for q in queries] == [
        ("question", "How do I renew my passport?", 1.0)
    ]


def test_a_follow_up_weighs_the_history_query_fully() -> None:
    related = relatedness("How much does it cost?", [PASSPORT])
    assert related.cue and depends_on_history(related)
    queries = plan_queries("How much does it cost?", [PASSPORT], related, rewrite="passport fee")
    by_name = {q.name: q for q in queries}
    assert by_name["question"].weight == 1.0
    assert by_name["history"].weight == WEIGHTING.cap
    assert by_name["history"].text == "renew passport How much does it cost?"
    assert by_name["rewrite"].text == "passport fee"
    assert cited_weight(related) == WEIGHTING.cited


def test_a_self_contained_new_question_keeps_the_history_query_faint() -> None:
    question = "Are full-time students exempt from council tax?"
    related = relatedness(question, [PASSPORT])
    assert not related.cue and related.overlap == 0
    assert not depends_on_history(related)
    assert history_weight(related) == WEIGHTING.base
    assert cited_weight(related) == 0


def test_lexical_overlap_raises_the_weight_without_a_cue() -> None:
    question = "What documents does a passport renewal need from abroad?"
    related = relatedness(question, [PASSPORT])
    assert not related.cue and 0 < related.overlap < 1
    assert WEIGHTING.base < history_weight(related) < WEIGHTING.cap


def test_the_history_query_follows_a_thread_of_follow_ups_but_not_past_a_switch() -> None:
    followed = [turn("How many symphonies did Beethoven write?"), turn("Who was his teacher?")]
    assert len(thread(followed)) == 2
    switched = [turn("How many symphonies did Beethoven write?"), turn("When was Rome founded?")]
    assert len(thread(switched)) == 1
    related = relatedness("And when did he die?", followed)
    history = plan_queries("And when did he die?", followed, related)[1]
    assert "Beethoven" in history.text and "teacher" in history.text


def test_a_question_that_names_nothing_weighs_the_history_query_fully() -> None:
    related = relatedness("What's the price?", [PASSPORT])
    assert related.cue and related.overlap == 0
    assert depends_on_history(related)
    assert history_weight(related) == WEIGHTING.cap
    # The same words about something named read on their own.
    named = relatedness("What's the price of a fishing licence?", [PASSPORT])
    assert not named.cue and history_weight(named) == WEIGHTING.base


GARDENS = turn(
    "Did the Hanging Gardens of Babylon really exist?",
    "One of the Seven Wonders of the Ancient World; no trace of them was found [1].",
)
BUILT = turn("Who is said to have built them?", "Nebuchadnezzar II, by tradition [1].")
DANUBE = turn("How long is the Danube?", "About 2,850 km, through ten countries [1].")
RETURN = "Going back to the wonder, who were they made for?"


def test_a_return_after_a_digression_borrows_the_thread_it_returns_to() -> None:
    history = [GARDENS, BUILT, DANUBE]
    related = relatedness(RETURN, history)
    assert related.returning and related.cue
    assert related.overlap > 0  # "wonder" was said in the turn returned to, not the last
    assert relatedness(RETURN, history).as_dict()["returning"] is True
    text = history_query(RETURN, history)
    assert "Babylon" in text and "built" in text
    assert "Danube" not in text
    assert text.endswith(RETURN)
    # What the digression's answer cited is not lifted.
    assert cited_weight(related) == 0
    assert cited_weight(relatedness("Who is said to have built them?", [GARDENS])) > 0


def test_the_thread_continues_past_a_digression_it_returned_from() -> None:
    history = [GARDENS, BUILT, DANUBE, turn(RETURN)]
    assert thread(history) == [3, 1, 0]
    text = history_query("And when were they destroyed?", history)
    assert "Babylon" in text and "Danube" not in text
    # Without the return the digression ends the thread.
    assert thread([GARDENS, BUILT, DANUBE]) == [2]


def test_a_history_query_of_weight_zero_changes_nothing() -> None:
    question = legs("A", "B", "C")
    alone = fuse(question, LEGS, method="zscore", rrf_k=60, limit=3)
    result = fuse_queries(
        {"question": question, "history": legs("C", "B", "A")},
        {"question": 1.0, "history": 0.0},
        leg_weights=LEGS,
        method="zscore",
        rrf_k=60,
        k=3,
    )
    assert [h.chunk_id for h in result.hits] == [f.chunk_id for f in alone]
    assert all(names == ["question"] for names in result.contributions.values())


def test_the_weights_decide_between_the_queries() -> None:
    per_query = {
        "question": legs("A", "B", "C", "D", "E", "F"),
        "history": legs("D", "C", "E", "F", "B", "A"),
    }
    faint = fuse_queries(
        per_query,
        {"question": 1.0, "history": 0.25},
        leg_weights=LEGS,
        method="zscore",
        rrf_k=60,
        k=2,
    )
    strong = fuse_queries(
        per_query,
        {"question": 1.0, "history": 4.0},
        leg_weights=LEGS,
        method="zscore",
        rrf_k=60,
        k=2,
    )
    assert ranked(faint.hits)[0] == "A"
    assert ranked(strong.hits)[0] == "D"
    assert strong.contributions["D1"] == ["history"]
    assert faint.contributions["A1"] == ["question"]


def test_documents_the_previous_answer_cited_are_candidates_with_their_own_leg() -> None:
    per_query = {"question": legs("A", "B", "C", "D", "E"), "history": legs("B", "A", "C", "E")}
    weights = {"question": 1.0, "history": 1.0}
    without = fuse_queries(per_query, weights, leg_weights=LEGS, method="zscore", rrf_k=60, k=5)
    cited = fuse_queries(
        per_query,
        weights,
        leg_weights=LEGS,
        method="zscore",
        rrf_k=60,
        k=5,
        cited=["E1"],
        cited_weight=1.0,
    )
    assert ranked(without.hits).index("E") > ranked(cited.hits).index("E")
    assert CITED in cited.contributions["E1"]
    assert CITED not in cited.contributions["A1"]
    rrf = fuse_queries(
        per_query,
        weights,
        leg_weights=LEGS,
        method="rrf",
        rrf_k=60,
        k=5,
        cited=["E1"],
        cited_weight=1.0,
    )
    assert CITED in rrf.contributions["E1"]

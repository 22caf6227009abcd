"""The extractive answer reads like a person wrote it (issue 29, item 6): it quotes the
sentences that answer the question by their stemmed words and by meaning, never a heading
glued to a sentence, and says where a quote is from when its source knows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from app.llm.responder import EXTRACTIVE_NOTICE, ExtractiveResponder, Generation, ModelRequest
from app.llm.sentences import describe_location
from app.llm.shapes import SourceRef

REFUNDS = (
    "Refunds for annual and monthly plans\n"
    "Annual plans can be refunded within 45 days of purchase.\n"
    "Monthly plans renew on the first day of each month and cannot be cancelled midway."
)


def source(n: int, text: str, title: str = "Refund policy", **extra: Any) -> SourceRef:
    ref = SourceRef(n=n, id=f"c{n}", kind="kb", source_id="d", title=title, score=1.0, text=text)
    return {**ref, **extra}  # type: ignore[typeddict-item]


def test_the_refund_window_is_answered_by_its_stemmed_words() -> None:
    answer = ExtractiveResponder().compose([source(1, REFUNDS)], [], "What is the refund window?")
    assert answer == (
        EXTRACTIVE_NOTICE + "Annual plans can be refunded within 45 days of purchase. [1]"
    )


def test_a_heading_without_markup_is_never_a_sentence() -> None:
    answer = ExtractiveResponder().compose(
        [source(1, REFUNDS)], [], "Can annual plans be refunded?"
    )
    assert "Refunds for annual and monthly plans" not in answer  # the heading: no sentence
    # The monthly plans' sentence shares only "plans": well under the best one, left out.
    assert answer == (
        EXTRACTIVE_NOTICE + "Annual plans can be refunded within 45 days of purchase. [1]"
    )


def test_a_sentence_wrapped_over_two_lines_is_quoted_whole() -> None:
    wrapped = "Annual plans can be refunded within 45\ndays of purchase, in full."
    answer = ExtractiveResponder().compose([source(1, wrapped)], [], "Are refunds possible?")
    assert answer == (
        EXTRACTIVE_NOTICE + "Annual plans can be refunded within 45 days of purchase, in full. [1]"
    )


def test_a_quote_names_its_location_when_the_source_knows_it() -> None:
    located = source(
        1, REFUNDS, location={"page": 12, "page_end": 13, "section": "3 Refunds \u203a 3.2 Annual"}
    )
    answer = ExtractiveResponder().compose([located], [], "What is the refund window?")
    assert answer == (
        EXTRACTIVE_NOTICE + "Refund policy, pages 12-13, section 3 Refunds \u203a 3.2 Annual: "
        "Annual plans can be refunded within 45 days of purchase. [1]"
    )


class MeaningEmbedder:
    """A stand-in for a semantic model: texts about money coming back share a direction."""

    name = "meaning"
    dimension = 2
    max_input_tokens: int | None = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        def vector(text: str) -> list[float]:
            about_money = any(w in text.lower() for w in ("money", "refund", "repaid"))
            x, y = (1.0, 0.1) if about_money else (0.1, 1.0)
            norm = math.hypot(x, y)
            return [x / norm, y / norm]

        return [vector(text) for text in texts]


async def test_a_sentence_sharing_no_word_answers_by_meaning() -> None:
    passage = (
        "Customers are repaid within fourteen days of the request.\n"
        "The office is closed on public holidays and at weekends."
    )
    question = "How soon do I get my money back?"
    request = ModelRequest(prompt=[], sources=[source(1, passage)], history=[], query=question)

    without = await ExtractiveResponder().answer(request, Generation())
    assert "repaid" not in without  # no word in common: the words alone find nothing

    answer = await ExtractiveResponder(embedder=MeaningEmbedder()).answer(request, Generation())
    assert answer == (
        EXTRACTIVE_NOTICE + "Customers are repaid within fourteen days of the request. [1]"
    )


def test_a_spreadsheet_quote_names_its_sheet_and_rows() -> None:
    located = source(1, REFUNDS, title="Plans", location={"sheet": "Refunds", "rows": "2-9"})
    answer = ExtractiveResponder().compose([located], [], "What is the refund window?")
    assert answer.startswith(EXTRACTIVE_NOTICE + "Plans, sheet Refunds, rows 2-9: Annual plans")


def test_a_quote_names_its_section_below_the_documents_own_title() -> None:
    """The document's own title heading tops its section paths: it is named once."""
    assert describe_location("Privacy", {"section": "Privacy"}) is None
    assert (
        describe_location("Getting started", {"section": "Getting started \u203a Attachments"})
        == "Getting started, section Attachments"
    )
    assert (
        describe_location("Refund policy", {"page": 12, "section": "3 Refunds \u203a 3.2 Annual"})
        == "Refund policy, page 12, section 3 Refunds \u203a 3.2 Annual"
    )


BIKE_PATHS = "Het nieuwe fietspad in wijk drie wordt volgend jaar verbreed."
"""A Dutch municipality's page: "fietspad", where the question says "fietspaden" and
"verbreding" where the page says "verbreed"."""


def test_a_dutch_tenants_question_meets_its_passage_by_dutch_stems() -> None:
    question = "Wanneer komt de verbreding van de fietspaden?"
    sources = [source(1, BIKE_PATHS, title="Wijk 3")]
    dutch = ExtractiveResponder().compose(sources, [], question, language="dutch")
    assert dutch == EXTRACTIVE_NOTICE + BIKE_PATHS + " [1]"
    # Stemmed as English, no word of the question is a word of the page: nothing found.
    english = ExtractiveResponder().compose(sources, [], question, language="english")
    assert BIKE_PATHS not in english


def test_a_configuration_without_a_stemmer_matches_words_as_written() -> None:
    sources = [source(1, BIKE_PATHS, title="Wijk 3")]
    found = ExtractiveResponder().compose(sources, [], "Welk fietspad?", language="simple")
    assert found == EXTRACTIVE_NOTICE + BIKE_PATHS + " [1]"
    missed = ExtractiveResponder().compose(sources, [], "Welke fietspaden?", language="simple")
    assert BIKE_PATHS not in missed

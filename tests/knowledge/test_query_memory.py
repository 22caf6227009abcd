"""The query memory: one model run per query however many stages ask, runs started early are
shared, a failed or cancelled wait loses nothing for the others."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Sequence

import pytest

from app.embeddings.onnx import OnnxMiniLMEmbedder
from app.embeddings.query_memory import QueryMemory


class CountingModel:
    """A stand-in for the model's forward pass: counts the texts it was given."""

    def __init__(self, delay: float = 0.0, fail: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.delay = delay
        self.fail = fail

    async def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        await asyncio.sleep(self.delay)
        if self.fail:
            raise RuntimeError("model down")
        return [[float(len(t)), 1.0] for t in texts]


def memory(model: CountingModel, size: int = 8) -> QueryMemory:
    return QueryMemory(model, key=str.lower, size=size)


async def test_texts_with_one_key_run_once() -> None:
    model = CountingModel()
    queries = memory(model)
    first = await queries.get(["Annual leave?"])
    again = await queries.get(["annual LEAVE?", "Annual leave?"])
    assert again == [first[0], first[0]]
    assert model.calls == [["Annual leave?"]]


async def test_a_started_run_is_waited_for_not_repeated() -> None:
    model = CountingModel(delay=0.05)
    queries = memory(model)
    queries.start(["travel expenses", "annual leave"])
    both = await asyncio.gather(queries.get(["travel expenses"]), queries.get(["annual leave"]))
    assert [v for (v,) in both] == [[15.0, 1.0], [12.0, 1.0]]
    assert model.calls == [["travel expenses", "annual leave"]]


async def test_a_cancelled_waiter_does_not_cancel_the_shared_run() -> None:
    model = CountingModel(delay=0.05)
    queries = memory(model)
    impatient = asyncio.ensure_future(queries.get(["remote work"]))
    patient = asyncio.ensure_future(queries.get(["remote work"]))
    await asyncio.sleep(0.01)
    impatient.cancel()
    assert await patient == [[11.0, 1.0]]
    assert len(model.calls) == 1


async def test_a_failed_run_reaches_its_waiter_and_the_next_call_runs_again() -> None:
    model = CountingModel(fail=True)
    queries = memory(model)
    with pytest.raises(RuntimeError, match="model down"):
        await queries.get(["laptops"])
    model.fail = False
    assert await queries.get(["laptops"]) == [[7.0, 1.0]]
    assert len(model.calls) == 2


async def test_a_failed_prefetch_nobody_awaited_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = CountingModel(fail=True)
    queries = memory(model)
    queries.start(["parental leave"])
    await asyncio.sleep(0.01)
    gc.collect()  # an unretrieved future's exception is reported when it is collected
    await asyncio.sleep(0)
    assert "never retrieved" not in caplog.text
    assert len(model.calls) == 1


async def test_memory_is_bounded() -> None:
    model = CountingModel()
    queries = memory(model, size=2)
    for text in ("a", "bb", "ccc"):
        await queries.get([text])
    await queries.get(["a"])  # the oldest fell out: computed again
    assert [c[0] for c in model.calls] == ["a", "bb", "ccc", "a"]


async def test_the_local_model_embeds_a_question_and_its_folded_form_once() -> None:
    embedder = OnnxMiniLMEmbedder()
    runs: list[list[str]] = []
    encode = embedder.encode

    def counting_encode(texts: Sequence[str]) -> list[list[float]]:
        runs.append(list(texts))
        return encode(texts)

    embedder.encode = counting_encode  # type: ignore[method-assign]
    embedder.prefetch(["How do I book  Annual Leave?"])
    [folded] = await embedder.embed(["how do i book annual leave?"])
    [typed] = await embedder.embed(["How do I book  Annual Leave?"])
    assert folded == typed
    assert runs == [["How do I book  Annual Leave?"]]
    [other] = await embedder.embed(["How do I claim travel expenses?"])
    assert other != typed and len(runs) == 2

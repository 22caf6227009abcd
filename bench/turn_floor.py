"""The floor of a turn on the mandated stack (issue 32): the CPU its fixed parts cost alone.

    python -m bench.turn_floor [--calls 200]

Measured in this process (CPU time, `time.process_time`), each part on its own, nothing of
Threadline's around it:

  * LangGraph: a graph of nine nodes, each a trivial state update, checkpointed in PostgreSQL
    by langgraph-checkpoint-postgres with `durability="exit"` (one checkpoint a run, as the
    chat graph's runs are), on an embedded PostgreSQL;
  * the model call through LangChain's OpenAI provider, with two tools bound, against
    `bench/fake_openai.py` (40 tokens, no delay): `ainvoke` (what `/chat` does) and
    `astream` (what `/chat/stream` does);
  * the same streamed call through Threadline's own provider (`app/llm/providers.py`: the
    chunks read as dicts off the body, app/llm/openai_stream.py), merged once as the agent
    node merges them;
  * beside them, the same call through the bare `openai` SDK, unstreamed and streamed.

A turn pays all of these plus its own work (authentication, history, guards, retrieval,
embedding, persistence); `bench.turn_cost` measures whole turns and the irreducible endpoint.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypedDict

import httpx

from bench.common import ROOT, bench_database, free_port

NODES = [
    "validate",
    "messages",
    "history",
    "attachments",
    "classify",
    "retrieve",
    "context",
    "generate",
    "persist",
]


class _State(TypedDict, total=False):
    question: str
    step: int
    sources: list[dict[str, str]]


async def _cpu_ms(job: Callable[[], Awaitable[object]], calls: int) -> float:
    """The median CPU of `job` over `calls` runs, after five to warm up."""
    samples = []
    for _ in range(calls + 5):
        started = time.process_time()
        await job()
        samples.append((time.process_time() - started) * 1000)
    return statistics.median(samples[5:])


async def _graph_ms(database_url: str, calls: int) -> float:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.graph import END, START, StateGraph

    graph: StateGraph[_State] = StateGraph(_State)
    for step, name in enumerate(NODES):

        def node(state: _State, step: int = step) -> _State:
            return {"step": step, "sources": [{"id": str(step), "text": "x" * 200}] * 3}

        graph.add_node(name, node)
    graph.add_edge(START, NODES[0])
    for before, after in itertools.pairwise(NODES):
        graph.add_edge(before, after)
    graph.add_edge(NODES[-1], END)
    async with AsyncPostgresSaver.from_conn_string(database_url) as saver:
        await saver.setup()
        compiled = graph.compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "floor"}}

        async def run() -> None:
            async for _ in compiled.astream({"question": "q"}, config, durability="exit"):
                pass

        return await _cpu_ms(run, calls)


async def _model_ms(base_url: str, calls: int) -> dict[str, float]:
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from openai import AsyncOpenAI

    @tool
    def search_knowledge_base(query: str) -> str:
        """Search the knowledge base."""
        return ""

    @tool
    def read_earlier_turns(count: int) -> str:
        """Read earlier turns of the conversation."""
        return ""

    from langchain_core.messages.ai import add_ai_message_chunks

    from app.config import Settings
    from app.llm.providers import build_responder
    from app.llm.responder import ChatModelResponder

    model = ChatOpenAI(model="fake", base_url=base_url, api_key="bench")
    bound = model.bind_tools([search_knowledge_base, read_earlier_turns])
    settings = Settings(llm="openai-compatible", openai_base_url=base_url, openai_api_key="bench")
    product = build_responder(settings)
    assert isinstance(product, ChatModelResponder)
    ours = product.model.bind_tools([search_knowledge_base, read_earlier_turns])
    messages = [SystemMessage("Answer from the numbered sources. " * 20)] + [
        HumanMessage(f"Question {n} about the handbook's rules. " * 5) for n in range(6)
    ]
    sdk = AsyncOpenAI(base_url=base_url, api_key="bench")
    plain = [{"role": "system", "content": messages[0].text}] + [
        {"role": "user", "content": m.text} for m in messages[1:]
    ]

    async def invoke() -> None:
        await bound.ainvoke(messages)

    async def stream() -> None:
        async for _ in bound.astream(messages):
            pass

    async def ours_stream() -> None:
        chunks: list[Any] = [chunk async for chunk in ours.astream(messages)]
        add_ai_message_chunks(chunks[0], *chunks[1:])

    async def sdk_invoke() -> None:
        await sdk.chat.completions.create(model="fake", messages=plain)  # type: ignore[arg-type]

    async def sdk_stream() -> None:
        chunks = await sdk.chat.completions.create(
            model="fake",
            messages=plain,  # type: ignore[arg-type]
            stream=True,
        )
        async for _ in chunks:  # type: ignore[union-attr]
            pass

    return {
        "LangChain ChatOpenAI.ainvoke (2 tools bound)": await _cpu_ms(invoke, calls),
        "LangChain ChatOpenAI.astream (2 tools bound)": await _cpu_ms(stream, calls),
        "Threadline's provider, astream (2 tools bound)": await _cpu_ms(ours_stream, calls),
        "openai SDK, unstreamed": await _cpu_ms(sdk_invoke, calls),
        "openai SDK, streamed": await _cpu_ms(sdk_stream, calls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    port = free_port()
    fake = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.fake_openai",
            "--port",
            str(port),
            "--tokens",
            "40",
            "--interval",
            "0",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        with bench_database() as owner_url:
            graph = asyncio.run(_graph_ms(owner_url, args.calls))
        models = asyncio.run(_model_ms(f"http://127.0.0.1:{port}/v1", args.calls))
    finally:
        fake.terminate()
        fake.wait(10)
    print(f"CPU of this process per call, median of {args.calls} (40-token answers)")
    print(f"  LangGraph, 9 nodes, PostgreSQL checkpoint (exit)  {graph:6.2f} ms")
    for name, ms in models.items():
        print(f"  {name:<49} {ms:6.2f} ms")
    print("  (issue 32's target for a whole turn, server + PostgreSQL: <= 39 ms, 1 session)")


if __name__ == "__main__":
    main()

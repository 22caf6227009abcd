"""Build the chat turn's graph once, at start-up."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from contextvars import ContextVar
from typing import Any, Protocol

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.nodes.agent import agent, tools, wants_tools
from app.conversation.pipeline.nodes.answer_early import answer_early
from app.conversation.pipeline.nodes.build_context import build_context
from app.conversation.pipeline.nodes.classify import classify
from app.conversation.pipeline.nodes.generate import generate
from app.conversation.pipeline.nodes.guard_input import guard_input
from app.conversation.pipeline.nodes.load_history import load_history
from app.conversation.pipeline.nodes.persist import persist
from app.conversation.pipeline.nodes.process_messages import process_messages
from app.conversation.pipeline.nodes.resolve_attachments import resolve_attachments
from app.conversation.pipeline.nodes.retrieve import retrieve
from app.conversation.pipeline.nodes.triage import triage
from app.conversation.pipeline.nodes.validate import validate
from app.conversation.pipeline.nodes.validate_output import validate_output
from app.conversation.pipeline.state import TurnState, TurnUpdate

# Every node, in the order a turn meets them. The edges are linear except where a turn may
# leave the main line: triage may answer early (-> answer_early -> persist), and a provider
# with tool calling gets the same retrieved context but answers through agent, which may loop
# agent <-> tools for more, instead of generate (ADR 0041).
PIPELINE = (
    ("validate", validate),
    ("guard_input", guard_input),
    ("process_messages", process_messages),
    ("load_history", load_history),
    ("resolve_attachments", resolve_attachments),
    ("triage", triage),
    ("answer_early", answer_early),
    ("classify", classify),
    ("retrieve", retrieve),
    ("build_context", build_context),
    ("generate", generate),
    ("agent", agent),
    ("tools", tools),
    ("validate_output", validate_output),
    ("persist", persist),
)
NODE_NAMES = tuple(name for name, _ in PIPELINE)
LINEAR = (
    ("validate", "guard_input"),
    ("guard_input", "process_messages"),
    ("process_messages", "load_history"),
    ("load_history", "resolve_attachments"),
    ("resolve_attachments", "triage"),
    ("answer_early", "persist"),
    ("classify", "retrieve"),
    ("retrieve", "build_context"),
    ("generate", "validate_output"),
    ("tools", "agent"),
    ("validate_output", "persist"),
)

TurnGraph = CompiledStateGraph[TurnState, TurnContext, TurnState, TurnState]


class Node(Protocol):
    """What a pipeline stage is: a coroutine from the turn state and runtime to a state update."""

    def __call__(
        self, state: TurnState, runtime: Runtime[TurnContext]
    ) -> Awaitable[TurnUpdate]: ...


# Time spent inside each node of the current run that completed, by node name (set by the
# runner; a node that raised has no entry).
NODE_TIMINGS: ContextVar[dict[str, float] | None] = ContextVar("node_timings", default=None)


# The nodes from which a turn reads no more before its model call (or its early answer, or
# its final write): the turn's read transaction is committed before they start (ADR 0070).
AFTER_READS = frozenset({"generate", "agent", "tools", "answer_early", "persist"})


def _timed(name: str, node: Node) -> Node:
    ends_reads = name in AFTER_READS

    async def run(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
        if ends_reads:
            await runtime.context.end_reads()
        started = time.perf_counter()
        update = await node(state, runtime)
        timings = NODE_TIMINGS.get()
        if timings is not None:
            timings[name] = round((time.perf_counter() - started) * 1000, 3)
        return update

    run.__name__ = name
    return run


# The routes between nodes are coroutines: LangGraph runs a plain function on a worker thread,
# one thread hop per route per turn for a dictionary lookup.
async def _after_triage(state: TurnState) -> str:
    return "answer_early" if state["triage"]["skip_llm"] else "classify"


async def _after_build_context(state: TurnState) -> str:
    return "agent" if state["triage"]["route"] == "tools" else "generate"


async def _after_agent(state: TurnState) -> str:
    return "tools" if wants_tools(state) else "validate_output"


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None) -> TurnGraph:
    """Compile the turn pipeline, timing each node, with the given checkpointer."""
    graph = StateGraph(TurnState, context_schema=TurnContext)
    for name, node in PIPELINE:
        graph.add_node(name, _timed(name, node))
    graph.add_edge(START, "validate")
    for source, target in LINEAR:
        graph.add_edge(source, target)
    graph.add_conditional_edges("triage", _after_triage, ["answer_early", "classify"])
    graph.add_conditional_edges("build_context", _after_build_context, ["agent", "generate"])
    graph.add_conditional_edges("agent", _after_agent, ["tools", "validate_output"])
    graph.add_edge("persist", END)
    compiled = graph.compile(checkpointer=checkpointer, name="chat_turn")
    # Each node's update comes out as the node finishes, whatever the stream modes: without
    # this, a run with "updates" only (`/chat`) yields the last step's update after the final
    # checkpoint write, and the answer waits for it.
    compiled.stream_eager = True
    return compiled

"""Build the chat turn's graph once, at start-up."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from app.graph.context import TurnContext
from app.graph.nodes.build_context import build_context
from app.graph.nodes.classify import classify
from app.graph.nodes.generate import generate
from app.graph.nodes.load_history import load_history
from app.graph.nodes.persist import persist
from app.graph.nodes.process_messages import process_messages
from app.graph.nodes.resolve_attachments import resolve_attachments
from app.graph.nodes.retrieve import retrieve
from app.graph.nodes.validate import validate
from app.graph.state import TurnState

PIPELINE = (
    ("validate", validate),
    ("process_messages", process_messages),
    ("load_history", load_history),
    ("resolve_attachments", resolve_attachments),
    ("classify", classify),
    ("retrieve", retrieve),
    ("build_context", build_context),
    ("generate", generate),
    ("persist", persist),
)
NODE_NAMES = tuple(name for name, _ in PIPELINE)

TurnGraph = CompiledStateGraph[TurnState, TurnContext, TurnState, TurnState]


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None) -> TurnGraph:
    graph = StateGraph(TurnState, context_schema=TurnContext)
    previous = START
    for name, node in PIPELINE:
        graph.add_node(name, node)
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, END)
    return graph.compile(checkpointer=checkpointer, name="chat_turn")

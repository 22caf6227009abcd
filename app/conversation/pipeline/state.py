"""The typed state: the only contract between the pipeline's nodes.

Everything here is plain JSON-able data (ids are strings) because the checkpointer stores it.
Every field is per turn: the caller passes a complete initial state (`initial_state`), so a
value from the previous turn of the thread can never be mistaken for this turn's.

The turn's working data (`Working[...]`: the request, history, passages, prompt, sources) is
never checkpointed: it is rebuilt every turn from the request and `query_history`, so the
thread's checkpoint keeps only the turn's outcome. Fewer stored channels make each turn's
checkpoint read and write smaller (ADR 0013).

`context_metadata` is merged, not replaced: each node returns only the keys it adds, and the
turn starts from an empty one (`initial_state` overwrites the previous turn's).
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any, Literal, NamedTuple, TypedDict, TypeVar, cast

from langgraph.channels.untracked_value import UntrackedValue
from langgraph.types import Overwrite

from app.conversation.turn.types import ChatMessage, HistoryTurn, PassageData, SourceRef, Usage

Composition = Literal["pure_kb", "pure_doc", "hybrid", "chat"]
T = TypeVar("T")
Working = Annotated[T, UntrackedValue]
"""A field only this turn's nodes read: held in memory, never written to the checkpoint."""


class TurnState(TypedDict):
    # --- request (set by the caller) ------------------------------------------------------

    """The graph's state: one turn's request, working data and outcome."""

    tenant_id: str
    user_id: str
    session_id: str
    turn_id: str
    request_messages: Working[list[ChatMessage]]
    request_attachment_ids: Working[list[str]]
    session_attachment_ids: Working[list[str]]
    stored_query: Working[str]
    """The newest message as the turn's row holds it (anonymised when configured)."""
    """Attachments active in the session before this turn (read when it was admitted)."""
    started_at: float
    """Wall-clock time (epoch seconds) the request arrived: persist records the latency."""
    stream_tokens: Working[bool]
    """Whether the client watches the answer arrive (`/chat/stream`): generate streams it."""
    # --- guard_input, triage (may answer without the model) --------------------------------
    triage: dict[str, Any]
    """{route, skip_llm, log, answer, ...}: see app/conversation/pipeline/nodes/triage.py."""
    # --- process_messages -----------------------------------------------------------------
    query: str
    client_history: Working[list[ChatMessage]]
    # --- load_history ---------------------------------------------------------------------
    history: Working[list[HistoryTurn]]
    history_source: str
    summary: Working[str]
    summarized_turns: int
    awaiting_summary: Working[int]
    """Turns the summary does not cover yet that are older than the history cache: left out
    of this turn's prompt, they wait for the background fold (ADR 0035)."""
    recent_turns: Working[list[HistoryTurn]]
    """The session's newest finished turns as loaded (the history cache's view), so persist
    can extend the cached snapshot without reading them again."""
    finished_turns: int
    """How many finished turns the session had at admission (-1: not counted), then when
    history was loaded."""
    # --- resolve_attachments --------------------------------------------------------------
    active_attachment_ids: Working[list[str]]
    # --- classify -------------------------------------------------------------------------
    query_composition: Composition
    composition_confidence: float
    is_follow_up: bool
    reformulated_query: str
    retrieval_plan: Working[dict[str, Any]]
    """What retrieve searches with (`app.conversation.pipeline.query_plan`): `queries` (name, text,
    weight)
    and `cited_weight`, the weight of the documents the previous answer cited."""
    # --- retrieve -------------------------------------------------------------------------
    passages: Working[list[PassageData]]
    # --- build_context --------------------------------------------------------------------
    prompt: Working[list[ChatMessage]]
    sources: Working[list[SourceRef]]
    context_metadata: Annotated[dict[str, Any], operator.or_]
    """The turn's manifest, stored with its row: each node merges in its own keys."""
    # --- generate -------------------------------------------------------------------------
    answer: str
    model: str
    usage: Usage
    # --- agent, tools (providers with tool calling) -----------------------------------------
    tool_rounds: int
    agent_messages: Working[list[dict[str, Any]]]
    """The tool-calling exchange so far (LangChain message dicts); emptied once answered."""
    # --- validate_output ------------------------------------------------------------------
    validation: dict[str, Any]
    # --- persist --------------------------------------------------------------------------
    status: str


def initial_state(
    *,
    tenant_id: str,
    user_id: str,
    session_id: str,
    turn_id: str,
    messages: list[ChatMessage],
    attachment_ids: list[str],
    session_attachment_ids: list[str],
    stored_query: str,
    started_at: float,
    finished_turns: int = -1,
    stream_tokens: bool = True,
) -> TurnState:
    """The complete state a turn starts from."""
    return TurnState(
        tenant_id=tenant_id,
        user_id=user_id,
        session_id=session_id,
        turn_id=turn_id,
        request_messages=messages,
        request_attachment_ids=attachment_ids,
        session_attachment_ids=session_attachment_ids,
        stored_query=stored_query,
        started_at=started_at,
        stream_tokens=stream_tokens,
        triage=new_triage(),
        query="",
        client_history=[],
        history=[],
        history_source="",
        summary="",
        summarized_turns=0,
        awaiting_summary=0,
        recent_turns=[],
        finished_turns=finished_turns,
        active_attachment_ids=[],
        query_composition="chat",
        composition_confidence=0.0,
        is_follow_up=False,
        reformulated_query="",
        retrieval_plan={},
        passages=[],
        prompt=[],
        sources=[],
        # The reducer would merge this turn's keys into the previous turn's (the thread's
        # checkpoint holds them): the turn starts from an empty manifest instead.
        context_metadata=cast(dict[str, Any], Overwrite({})),
        answer="",
        model="",
        usage=Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0),
        tool_rounds=0,
        agent_messages=[],
        validation={},
        status="pending",
    )


class TurnIds(NamedTuple):
    """The turn's ids, parsed (the state holds them as strings for the checkpointer)."""

    tenant: uuid.UUID
    user: uuid.UUID
    session: uuid.UUID
    turn: uuid.UUID


def turn_ids(state: TurnState) -> TurnIds:
    """The turn's tenant, user, session and turn ids as UUIDs."""
    return TurnIds(
        tenant=uuid.UUID(state["tenant_id"]),
        user=uuid.UUID(state["user_id"]),
        session=uuid.UUID(state["session_id"]),
        turn=uuid.UUID(state["turn_id"]),
    )


def new_triage() -> dict[str, Any]:
    """The triage record before any step decided."""
    return {"route": "llm", "skip_llm": False, "log": [], "answer": None}


def public_triage(triage: dict[str, Any]) -> dict[str, Any]:
    """The triage record as returned and audited (the early answer is the answer itself)."""
    return {k: v for k, v in triage.items() if k != "answer"}

"""The typed state: the only contract between the pipeline's nodes.

Every field is per turn: the caller passes a complete initial state (`initial_state`), so a
value from the previous turn of the thread can never be mistaken for this turn's. What is
checkpointed is plain data LangGraph's serializer stores natively (TypedDicts, lists, strings,
numbers and UUIDs: ids stay UUIDs, ADR 0071), never a class it would have to import back.

The turn's working data (`Working[...]`: the request, history, passages, prompt, sources) is
never checkpointed: it is rebuilt every turn from the request and `query_history`, so the
thread's checkpoint keeps only the turn's outcome. Fewer stored channels make each turn's
checkpoint read and write smaller (ADR 0013).

`context_metadata` is the turn's manifest as stored (its JSON), merged, not replaced: each node
returns the typed sections it writes (`app.conversation.turn.manifest`), which the channel's
reducer (`add_sections`) merges in; the turn starts from an empty one (`initial_state`
overwrites the previous turn's). `manifest_of` reads it back as a `Manifest`.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal, NamedTuple, NotRequired, TypedDict, TypeVar, cast

from langgraph.channels.untracked_value import UntrackedValue
from langgraph.types import Overwrite

from app.conversation.turn.manifest import Manifest
from app.conversation.turn.manifest_records import Record, TriageRecord
from app.conversation.turn.types import ChatMessage, HistoryTurn, PassageData, SourceRef, Usage
from app.core.json_types import JsonObject
from app.retrieval.base import WeightedQuery

Composition = Literal["pure_kb", "pure_doc", "hybrid", "chat"]
T = TypeVar("T")
Working = Annotated[T, UntrackedValue]
"""A field only this turn's nodes read: held in memory, never written to the checkpoint."""


def add_sections(current: JsonObject, update: Record | JsonObject) -> JsonObject:
    """`context_metadata`'s reducer: a node's manifest sections (validated when the node built
    them) merged into the turn's manifest, each field replacing the same field."""
    return {**current, **(update.dump() if isinstance(update, Record) else update)}


def manifest_of(state: TurnState) -> Manifest:
    """The turn's manifest so far, typed."""
    return Manifest.read(state["context_metadata"])


class FaqHit(TypedDict):
    """The FAQ entry triage answered from."""

    id: str
    question: str
    similarity: float


class Triage(TypedDict):
    """What the input guardrail and triage decided: the `route` (`blocked`, `off_topic`,
    `faq`, `smalltalk`, or `llm`/`tools` when the model answers), whether the model is
    skipped, one `log` line per step, and the early `answer` when there is one."""

    route: str
    skip_llm: bool
    log: list[str]
    answer: str | None
    faq: NotRequired[FaqHit]
    intent: NotRequired[str]
    flags: NotRequired[dict[str, list[str]]]
    """The input checks that flagged the message (check -> what they found)."""
    blocked_by: NotRequired[str]


class RetrievalPlan(TypedDict):
    """What retrieve searches with (`app.conversation.pipeline.query_plan`): the queries, and
    the weight of the documents the previous answer cited."""

    queries: list[WeightedQuery]
    cited_weight: float


class TurnState(TypedDict):
    # --- request (set by the caller) ------------------------------------------------------

    """The graph's state: one turn's request, working data and outcome."""

    tenant_id: Working[uuid.UUID]
    user_id: Working[uuid.UUID]
    session_id: Working[uuid.UUID]
    """Who asks, and where: the thread is the session, its row names the tenant and the
    user, so none of the three is checkpointed (a UUID is stored as a blob row of its own)."""
    turn_id: uuid.UUID
    """Checkpointed: the thread's checkpoint names the turn whose outcome it holds."""
    request_messages: Working[list[ChatMessage]]
    request_attachment_ids: Working[list[uuid.UUID]]
    session_attachment_ids: Working[list[uuid.UUID]]
    stored_query: Working[str]
    """The newest message as the turn's row holds it (anonymised when configured)."""
    """Attachments active in the session before this turn (read when it was admitted)."""
    started_at: float
    """Wall-clock time (epoch seconds) the request arrived: persist records the latency."""
    stream_tokens: Working[bool]
    """Whether the client watches the answer arrive (`/chat/stream`): generate streams it."""
    # --- guard_input, triage (may answer without the model) --------------------------------
    triage: Triage
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
    active_attachment_ids: Working[list[uuid.UUID]]
    # --- retrieve (read with the request, at admission) -----------------------------------
    collections: Working[list[uuid.UUID]]
    """The knowledge-base collections the turn may search (ADR 0086)."""
    collection_scope: Working[list[uuid.UUID]]
    """The collections the session is restricted to (empty: not restricted)."""
    # --- classify -------------------------------------------------------------------------
    query_composition: Composition
    composition_confidence: float
    is_follow_up: bool
    reformulated_query: str
    retrieval_plan: Working[RetrievalPlan]
    # --- retrieve -------------------------------------------------------------------------
    passages: Working[list[PassageData]]
    # --- build_context --------------------------------------------------------------------
    prompt: Working[list[ChatMessage]]
    sources: Working[list[SourceRef]]
    context_metadata: Annotated[JsonObject, add_sections]
    """The turn's manifest, stored with its row: each node merges in its own sections."""
    # --- generate -------------------------------------------------------------------------
    answer: str
    model: str
    usage: Working[Usage]
    """The model's token counts: the turn's row stores them (prompt and completion tokens)."""
    # --- agent, tools (providers with tool calling) -----------------------------------------
    tool_rounds: int
    agent_messages: Working[list[JsonObject]]
    """The tool-calling exchange so far (LangChain message dicts); emptied once answered."""
    # --- persist --------------------------------------------------------------------------
    status: str


class TurnUpdate(TypedDict, total=False):
    """What a node returns: the fields of the state it sets. Its `context_metadata` is the
    manifest sections it writes (merged in by the reducer), or an `Overwrite` of the whole."""

    status: str
    triage: Triage
    request_messages: list[ChatMessage]
    query: str
    client_history: list[ChatMessage]
    history: list[HistoryTurn]
    history_source: str
    summary: str
    summarized_turns: int
    awaiting_summary: int
    recent_turns: list[HistoryTurn]
    finished_turns: int
    active_attachment_ids: list[uuid.UUID]
    query_composition: Composition
    composition_confidence: float
    is_follow_up: bool
    reformulated_query: str
    retrieval_plan: RetrievalPlan
    passages: list[PassageData]
    prompt: list[ChatMessage]
    sources: list[SourceRef]
    context_metadata: Record | Overwrite
    answer: str
    model: str
    usage: Working[Usage]
    """The model's token counts: the turn's row stores them (prompt and completion tokens)."""
    tool_rounds: int
    agent_messages: list[JsonObject]


def initial_state(
    *,
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    messages: list[ChatMessage],
    attachment_ids: list[uuid.UUID],
    session_attachment_ids: list[uuid.UUID],
    stored_query: str,
    started_at: float,
    collections: list[uuid.UUID],
    collection_scope: list[uuid.UUID],
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
        collections=collections,
        collection_scope=collection_scope,
        query_composition="chat",
        composition_confidence=0.0,
        is_follow_up=False,
        reformulated_query="",
        retrieval_plan=RetrievalPlan(queries=[], cited_weight=0.0),
        passages=[],
        prompt=[],
        sources=[],
        # The reducer would merge this turn's keys into the previous turn's (the thread's
        # checkpoint holds them): the turn starts from an empty manifest instead.
        context_metadata=cast(JsonObject, Overwrite({})),
        answer="",
        model="",
        usage=Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0),
        tool_rounds=0,
        agent_messages=[],
        status="pending",
    )


class TurnIds(NamedTuple):
    """The turn's ids."""

    tenant: uuid.UUID
    user: uuid.UUID
    session: uuid.UUID
    turn: uuid.UUID


def turn_ids(state: TurnState) -> TurnIds:
    """The turn's tenant, user, session and turn ids."""
    return TurnIds(
        tenant=state["tenant_id"],
        user=state["user_id"],
        session=state["session_id"],
        turn=state["turn_id"],
    )


def new_triage() -> Triage:
    """The triage record before any step decided."""
    return Triage(route="llm", skip_llm=False, log=[], answer=None)


def public_triage(triage: Triage) -> TriageRecord:
    """The triage record as returned and audited (the early answer is the answer itself)."""
    return TriageRecord.model_validate({k: v for k, v in triage.items() if k != "answer"})

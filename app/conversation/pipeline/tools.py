"""The agent's tools, for providers that support tool calling.

`search_knowledge_base(query)` searches the tenant's knowledge base and the session's active
attachments (the same hybrid retrieval as the always-retrieve path); `retrieve_past_answer
(turn_id)` reads one of this session's earlier answers; `lookup_past_conversation(topic)`
finds this session's earlier turns about a topic. Every query filters by tenant, user and
session (and RLS scopes the transaction to the tenant): a turn id of someone else, or of
another conversation, reads as "not found".

What each call returned is recorded by id only (chunk ids, turn ids), never the text.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from langchain_core.language_models import BaseChatModel
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.source_framing import defuse, quote_source
from app.conversation.pipeline.state import TurnState
from app.conversation.repository import TurnRepository
from app.conversation.turn.manifest_records import ToolCall
from app.conversation.turn.types import SourceRef
from app.core.json_types import JsonObject
from app.core.text import content_words
from app.llm.responder import ChatModelResponder, Responder
from app.llm.tokens import count_tokens, truncate_to_tokens

PAST_TURNS_LIMIT = 5
PAST_ANSWER_TOKENS = 800

TOOL_SCHEMAS: list[dict[str, Any]] = [  # as LangChain's bind_tools takes them
    {
        "type": "function",
        "function": {
            "name": "search_knowledge_base",
            "description": (
                "Search the organisation's knowledge base and the user's attached documents. "
                "Write a complete, standalone query (resolve 'it', 'that one' from the "
                "conversation). Results are numbered sources to cite as [n]."
            ),
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "Standalone query."}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "retrieve_past_answer",
            "description": "The full text of an earlier answer in this conversation, by turn id.",
            "parameters": {
                "type": "object",
                "properties": {"turn_id": {"type": "string"}},
                "required": ["turn_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "lookup_past_conversation",
            "description": (
                "Find earlier turns of this conversation about a topic: their turn ids, "
                "questions and the start of their answers."
            ),
            "parameters": {
                "type": "object",
                "properties": {"topic": {"type": "string"}},
                "required": ["topic"],
            },
        },
    },
]
TOOL_NAMES = frozenset(t["function"]["name"] for t in TOOL_SCHEMAS)

AGENT_INSTRUCTIONS = (
    "\n\nYou have tools. The sources found for the question come with it: answer from them "
    "when they hold the answer. Call search_knowledge_base only when they do not, with a "
    "standalone query you write yourself; do not search for small talk or when the "
    "conversation already holds the answer. Use lookup_past_conversation and "
    "retrieve_past_answer for questions about earlier turns. Cite sources and search results "
    "by their numbers, like [1]."
)


@cache
def instruction_tokens() -> int:
    """What the agent's instructions add to a prompt, in tokens (counted once: every tool
    turn's budget keeps room for them)."""
    return count_tokens(AGENT_INSTRUCTIONS)


def tool_model(responder: Responder) -> BaseChatModel | None:
    """The responder's chat model if its provider supports tool calling, else None (the
    always-retrieve path). LangChain's base class raises NotImplementedError in bind_tools."""
    if not isinstance(responder, ChatModelResponder):
        return None
    model = responder.model
    if type(model).bind_tools is BaseChatModel.bind_tools:
        return None
    return model


@dataclass
class ToolOutcome:
    """What one tool call gives the model, the audit record, and any sources it found."""

    text: str
    """What the model reads."""
    record: ToolCall
    """What the audit keeps: the call and the ids it returned."""
    new_sources: list[SourceRef] = field(default_factory=list)


async def run_tool(
    ctx: TurnContext,
    db: AsyncSession,
    state: TurnState,
    name: str,
    args: JsonObject,
    sources: list[SourceRef],
) -> ToolOutcome:
    """Run the tool the model asked for, scoped to the turn's tenant, user and session."""
    record = ToolCall(tool=name, args=_short_args(args))
    if name == "search_knowledge_base":
        return await _search(ctx, db, state, str(args.get("query", "")), sources, record)
    if name == "retrieve_past_answer":
        return await _past_answer(db, state, str(args.get("turn_id", "")), record)
    if name == "lookup_past_conversation":
        return await _past_turns(db, state, str(args.get("topic", "")), record)
    record.error = "unknown_tool"
    return ToolOutcome(f"There is no tool named {name!r}.", record)


def _short_args(args: JsonObject) -> dict[str, str]:
    return {str(k): str(v)[:200] for k, v in args.items()}


async def _search(
    ctx: TurnContext,
    db: AsyncSession,
    state: TurnState,
    query: str,
    sources: list[SourceRef],
    record: ToolCall,
) -> ToolOutcome:
    if not query.strip():
        record.result_ids = []
        return ToolOutcome("The query was empty.", record)
    found = await ctx.retriever.search(
        db,
        state["tenant_id"],
        query,
        attachment_ids=state["active_attachment_ids"],
        k=ctx.settings.retrieval_k,
    )
    known = {s["id"]: s["n"] for s in sources}
    new: list[SourceRef] = []
    lines: list[str] = []
    for passage in found:
        n = known.get(passage.id)
        if n is None:  # numbered once per turn, so a citation keeps its meaning across rounds
            n = len(sources) + len(new) + 1
            known[passage.id] = n
            new.append(
                SourceRef(
                    n=n,
                    id=passage.id,
                    kind=passage.kind,
                    source_id=passage.source_id,
                    title=passage.title,
                    score=passage.score,
                    text=truncate_to_tokens(passage.text, ctx.settings.context_tokens_per_result),
                    location=passage.location,
                )
            )
            lines.append(quote_source(n, passage.title, new[-1]["text"], passage.location))
        else:  # its text is already in the prompt: quoting it again would spend the budget
            lines.append(f"[{n}] {defuse(passage.title)} (already among the sources above)")
    record.result_ids = [p.id for p in found]
    return ToolOutcome("\n\n".join(lines) or "Nothing relevant was found.", record, new)


async def _past_answer(
    db: AsyncSession, state: TurnState, turn_id: str, record: ToolCall
) -> ToolOutcome:
    try:
        wanted = uuid.UUID(turn_id)
    except ValueError:
        record.result_ids = []
        return ToolOutcome("That is not a turn id.", record)
    turns = TurnRepository(db, state["tenant_id"])
    row = await turns.finished_answer(state["user_id"], state["session_id"], wanted)
    if row is None:
        record.result_ids = []
        return ToolOutcome("No earlier answer has that id.", record)
    record.result_ids = [str(row.id)]
    answer = truncate_to_tokens(row.answer, PAST_ANSWER_TOKENS)
    return ToolOutcome(f"Question: {row.user_query}\nAnswer: {answer}", record)


async def _past_turns(
    db: AsyncSession, state: TurnState, topic: str, record: ToolCall
) -> ToolOutcome:
    words = [w for w in content_words(topic) if len(w) > 2][:8]
    if not words:
        record.result_ids = []
        return ToolOutcome("The topic was empty.", record)
    turns = TurnRepository(db, state["tenant_id"])
    rows = await turns.finished_about(
        state["user_id"], state["session_id"], words, PAST_TURNS_LIMIT
    )
    record.result_ids = [str(r.id) for r in rows]
    if not rows:
        return ToolOutcome("No earlier turn of this conversation is about that.", record)
    return ToolOutcome(
        "\n".join(f"turn {r.id}: Q: {r.user_query} | A: {r.answer[:200]}" for r in rows), record
    )

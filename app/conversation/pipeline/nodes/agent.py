"""agent and tools: the tool-calling loop, for providers that support it.

agent streams one model call with the tools bound, on the same prompt as the always-retrieve
path: the retrieved sources come with the question, so a turn they answer takes one model call
(ADR 0041). When the model asks for tools (a search of its own, an earlier answer), the tools
node runs them (in one tenant-scoped transaction) and the loop returns to agent. After
`tool_max_rounds` rounds the loop guard stops offering tools: the model then answers from the
sources gathered so far, in the same prompt shape as the always-retrieve path.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.messages.ai import add_ai_message_chunks
from langgraph.config import get_stream_writer
from langgraph.runtime import Runtime

from app.conversation.pipeline.budget import fit_question, manifest_source
from app.conversation.pipeline.citations import check_citations
from app.conversation.pipeline.composition import CompositionGuess, refine_with_results
from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.source_framing import question_message
from app.conversation.pipeline.state import TurnState, TurnUpdate, manifest_of, turn_ids
from app.conversation.pipeline.tool_context import (
    first_search_query,
    fit_result,
    result_allowance,
    tool_turn_metadata,
)
from app.conversation.pipeline.tools import (
    AGENT_INSTRUCTIONS,
    TOOL_SCHEMAS,
    instruction_tokens,
    run_tool,
    tool_model,
)
from app.conversation.turn.manifest import Manifest
from app.conversation.turn.manifest_records import Citations, PromptCache, ToolsRecord
from app.conversation.turn.types import ChatMessage, SourceRef, Usage
from app.core.db import restrict_to_collections
from app.llm.responder import cache_tokens, to_langchain
from app.llm.tokens import count_tokens


def _opening(state: TurnState, cache_breakpoints: bool) -> list[BaseMessage]:
    prompt = list(state["prompt"])
    prompt[0] = ChatMessage(role="system", content=prompt[0]["content"] + AGENT_INSTRUCTIONS)
    return to_langchain(prompt, cache_breakpoints=cache_breakpoints)


def _with_sources(state: TurnState, cache_breakpoints: bool) -> list[BaseMessage]:
    """The loop guard's last call: the question with every source gathered, no tools."""
    prompt = list(state["prompt"])
    # The question as the first call read it (build_context kept room for the instructions).
    budget = (manifest_of(state).token_budget or 0) - instruction_tokens()
    question = fit_question(state["query"], budget)
    prompt[-1] = question_message(state["sources"], question)
    return to_langchain(prompt, cache_breakpoints=cache_breakpoints)


def wants_tools(state: TurnState) -> bool:
    """After agent: whether the model asked for tools (and the loop guard allows them)."""
    return bool(state["agent_messages"])


async def agent(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """One model call of the tool-calling loop: tool calls, or the answer."""
    ctx = runtime.context
    model = tool_model(ctx.responder)
    assert model is not None  # the graph routes here only for tool-calling providers
    rounds = state["tool_rounds"]
    guard = rounds >= ctx.settings.tool_max_rounds
    if guard:
        messages = _with_sources(state, ctx.responder.cache_breakpoints)
        runnable: Any = model
    else:
        messages = (
            messages_from_dict(state["agent_messages"])
            if state["agent_messages"]
            else _opening(state, ctx.responder.cache_breakpoints)
        )
        runnable = model.bind_tools(TOOL_SCHEMAS)
    reply = await _call(runnable, messages, stream_tokens=state["stream_tokens"])
    so_far = manifest_of(state)
    tools_meta = (so_far.tools or ToolsRecord()).model_copy(
        update={"rounds": rounds, "loop_guard": guard}
    )
    usage = _usage(state, messages, reply)
    # What the provider's prompt cache served and stored over the turn's rounds (ADR 0035).
    written = so_far.prompt_cache.cache_write_tokens if so_far.prompt_cache else 0
    prompt_cache = PromptCache(
        cached_prompt_tokens=usage.get("cached_prompt_tokens", 0),
        cache_write_tokens=written + cache_tokens(reply.usage_metadata)[1],
    )
    if reply.tool_calls and not guard:
        asked = AIMessage(content=reply.text, tool_calls=reply.tool_calls)
        return TurnUpdate(
            agent_messages=messages_to_dict([*messages, asked]),
            usage=usage,
            context_metadata=Manifest(tools=tools_meta, prompt_cache=prompt_cache),
        )
    checked = check_citations(reply.text, state["sources"])
    # retrieve already corrected the composition with its passages: only sources of a kind
    # it did not find (from the tools) correct it again.
    refined = CompositionGuess(state["query_composition"], state["composition_confidence"], "")
    retrieved_ids = {p["id"] for p in state["passages"]}
    found = {p["kind"] for p in state["passages"]}
    added = {s["kind"] for s in state["sources"] if s["id"] not in retrieved_ids}
    if added - found:  # (a passage the budget left out changes nothing here)
        refined = refine_with_results(refined, found | added)
    # build_context ran before any tool: bring its figures up to date with what was gathered.
    retrieved = {p["id"] for p in state["passages"]} | {
        i for c in tools_meta.calls if c.tool == "search_knowledge_base" for i in c.result_ids or []
    }
    searched = first_search_query(messages_from_dict(state["agent_messages"]))
    figures = tool_turn_metadata(
        so_far.merged(Manifest(tools=tools_meta)),
        refined.composition,
        state["sources"],
        len(retrieved),
    )
    manifest = Manifest(
        **figures,
        composition_confidence=refined.confidence,
        tools=tools_meta,
        citations=Citations(cited=checked.cited, removed_invalid=checked.removed),
        model=ctx.responder.model_name,
        prompt_cache=prompt_cache,
        query_composition=refined.composition,
        sources=[manifest_source(s, count_tokens(s["text"])) for s in state["sources"]],
    )
    if searched is not None:  # the model's standalone query is this path's reformulation
        manifest.reformulated_query = searched
    return TurnUpdate(
        answer=checked.text,
        model=ctx.responder.model_name,
        usage=usage,
        agent_messages=[],
        query_composition=refined.composition,
        composition_confidence=refined.confidence,
        reformulated_query=searched or state["reformulated_query"],
        context_metadata=manifest,
    )


async def _call(runnable: Any, messages: list[BaseMessage], *, stream_tokens: bool) -> AIMessage:
    """One model call: streamed token by token when the client watches, else in one call.

    Streaming costs per chunk (the SDK parses each one, LangChain merges them, one event
    each): for `/chat`, where nobody watches, one call returns the same message for a
    fraction of that (issue 32).
    """
    if not stream_tokens:
        message = await runnable.ainvoke(messages)
        assert isinstance(message, AIMessage)
        return message
    write = get_stream_writer()
    chunks: list[AIMessageChunk] = []
    async for chunk in runnable.astream(messages):
        chunks.append(chunk)
        text = chunk.text
        if text:
            write({"token": text})
    if not chunks:
        return AIMessageChunk(content="")
    # Merged once at the end: adding each chunk to the reply so far rebuilds it every time.
    return add_ai_message_chunks(chunks[0], *chunks[1:])


def _usage(state: TurnState, messages: list[BaseMessage], reply: AIMessage) -> Usage:
    """This turn's usage so far plus this call's (reported, or counted when not)."""
    reported = reply.usage_metadata
    cached = 0
    if reported:
        prompt, completion = reported["input_tokens"], reported["output_tokens"]
        cached, _ = cache_tokens(reported)
    else:
        prompt = sum(count_tokens(m.text) for m in messages)
        completion = count_tokens(reply.text)
    before = state["usage"]
    return Usage(
        prompt_tokens=before["prompt_tokens"] + prompt,
        completion_tokens=before["completion_tokens"] + completion,
        total_tokens=before["total_tokens"] + prompt + completion,
        cached_prompt_tokens=before.get("cached_prompt_tokens", 0) + cached,
    )


async def tools(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """Run the tool calls the model asked for; their results fit the remaining budget."""
    ctx = runtime.context
    messages = messages_from_dict(state["agent_messages"])
    asked = messages[-1]
    assert isinstance(asked, AIMessage)
    sources: list[SourceRef] = list(state["sources"])
    so_far = manifest_of(state)
    tools_meta = so_far.tools or ToolsRecord()
    calls = list(tools_meta.calls)
    cut = list(tools_meta.truncated)
    used = tools_meta.result_tokens or 0
    allowance = result_allowance(so_far)
    round_number = state["tool_rounds"] + 1
    ids = turn_ids(state)
    async with ctx.transaction(ids.tenant) as db:
        # The tools search what the turn's retrieval may: the collections admission read for
        # this credential, in the session's scope (ADR 0078, 0086). Read again here by the
        # user alone, an admin's member-role key saw every collection through a tool call.
        await restrict_to_collections(db, state["collections"])
        for call in asked.tool_calls:
            outcome = await run_tool(ctx, db, state, call["name"], call["args"], sources)
            # Every round's results share what the prompt left of the budget.
            fitted = fit_result(outcome.text, outcome.new_sources, allowance - used, outcome.record)
            used += fitted.tokens
            sources += fitted.sources
            if fitted.note is not None:
                cut.append(fitted.note.model_copy(update={"round": round_number}))
            calls.append(outcome.record.model_copy(update={"round": round_number}))
            messages.append(ToolMessage(fitted.text, tool_call_id=call["id"] or call["name"]))
    update = {"calls": calls, "rounds": round_number, "result_tokens": used}
    tools_meta = tools_meta.model_copy(update=update | ({"truncated": cut} if cut else {}))
    return TurnUpdate(
        agent_messages=messages_to_dict(messages),
        sources=sources,
        tool_rounds=round_number,
        context_metadata=Manifest(tools=tools_meta),
    )

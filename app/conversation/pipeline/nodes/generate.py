"""generate: the answer from the configured responder — streamed token by token when the
client watches it arrive (`/chat/stream`), in one call otherwise (`/chat`); then its citations
are checked against the sources."""

from __future__ import annotations

from langgraph.config import get_stream_writer
from langgraph.runtime import Runtime

from app.conversation.pipeline.citations import check_citations
from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.policy import tenant_policy
from app.conversation.pipeline.state import TurnState, TurnUpdate, turn_ids
from app.conversation.turn.manifest import Manifest
from app.conversation.turn.manifest_records import Citations, PromptCache
from app.conversation.turn.types import Usage
from app.llm.responder import Generation, ModelRequest


async def generate(state: TurnState, runtime: Runtime[TurnContext]) -> TurnUpdate:
    """The model's answer (streamed when the client watches)."""
    responder = runtime.context.responder
    generation = Generation()
    policy = await tenant_policy(runtime.context, turn_ids(state).tenant)  # cached by guard
    request = ModelRequest(
        prompt=state["prompt"],
        sources=state["sources"],
        history=state["history"],
        query=state["query"],
        follow_up_query=state["reformulated_query"] if state["is_follow_up"] else "",
        language=policy.language,
    )
    if state["stream_tokens"]:
        write = get_stream_writer()
        async for delta in responder.stream(request, generation):
            write({"token": delta})
    else:
        await responder.answer(request, generation)
    checked = check_citations("".join(generation.text), state["sources"])
    usage = Usage(
        prompt_tokens=generation.prompt_tokens,
        completion_tokens=generation.completion_tokens,
        total_tokens=generation.prompt_tokens + generation.completion_tokens,
        cached_prompt_tokens=generation.cached_prompt_tokens,
    )
    manifest = Manifest(
        citations=Citations(cited=checked.cited, removed_invalid=checked.removed),
        model=responder.model_name,
        # What the provider's prompt cache served (ADR 0035): read, and written (Anthropic).
        prompt_cache=PromptCache(
            cached_prompt_tokens=generation.cached_prompt_tokens,
            cache_write_tokens=generation.cache_write_tokens,
        ),
    )
    return TurnUpdate(
        answer=checked.text, model=responder.model_name, usage=usage, context_metadata=manifest
    )

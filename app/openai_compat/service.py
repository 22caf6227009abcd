"""A chat completion is a Threadline turn: the request is mapped onto the chat service
(app/conversation/service/chat.py) and its answer or stream back onto OpenAI's format. Nothing of
the turn
is done here: tenancy, history, retrieval, guardrails, limits, quotas, idempotency and audit
are the chat service's, exactly as for `/chat` (docs/adr/0038-openai-and-mcp-faces.md).

The mapping:
- the session is the `X-Threadline-Session` header or `metadata.session_id`; without either,
  the client's own conversation id (`X-OpenWebUI-Chat-Id`, `X-Conversation-Id`) names it, its
  id derived from that (app/openai_compat/conversation.py), so every message of an Open WebUI
  chat lands in one session. Else a new session is opened. A session named by derivation is
  opened, if it does not exist, in the turn's admission transaction (a refused turn leaves
  none). With an `Idempotency-Key` and no conversation id, the new session's id is derived
  from the key, so a retry lands in the same session (and is the same request to the
  idempotency store);
- the client's conversation becomes `messages[]`, merged with the stored turns by the graph
  without duplicates; only its recent part is sent (the history window's worth), since
  older exchanges would fall outside the stored window and come back as duplicates;
- system, developer and tool messages are dropped: the assistant's instructions apply.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.principal import Principal
from app.conversation.checkpoints.repository import delete_thread
from app.conversation.repository.sessions import SessionRepository
from app.conversation.service.admission import Opening
from app.conversation.service.chat import ChatService
from app.conversation.service.sessions import CachedHistory
from app.conversation.turn.schemas import ChatRequest, ChatResponse, MessageIn
from app.core.errors import BadRequest, NotFound
from app.core.text import snippet
from app.models import ChatSession
from app.openai_compat.chunks import completion_chunks
from app.openai_compat.conversation import ClientConversation
from app.openai_compat.schemas import (
    MODEL_CREATED,
    MODEL_ID,
    AssistantMessage,
    ChatCompletion,
    Choice,
    CompletionRequest,
    CompletionUsage,
    ModelCard,
    ModelList,
    ThreadlineExtension,
    finish_reason,
)

_KEYED_SESSIONS = uuid.UUID("5b0c2f0e-6f3a-4f43-9a57-0c7d1d2e0038")
"""Namespace of the session ids derived from an Idempotency-Key."""
_CHAT_SESSIONS = uuid.UUID("0f1d6a52-3c8e-4b7e-8f0a-6b9e4c2d0038")
"""Namespace of the session ids derived from a client's conversation id (another namespace
than the keys', so a key and a chat id that happen to be equal name different sessions)."""
TITLE_CHARS = 80


@dataclass(frozen=True)
class StartedCompletion:
    """A streamed completion: its session and turn (for the headers) and its chunks."""

    session_id: uuid.UUID
    turn_id: uuid.UUID
    chunks: AsyncIterator[bytes]


def list_models() -> ModelList:
    """One model per configured assistant: for now one, `threadline`."""
    return ModelList(data=[ModelCard(id=MODEL_ID, created=MODEL_CREATED, owned_by="threadline")])


def session_opening(
    principal: Principal,
    session_id: uuid.UUID,
    title: str,
    history: CachedHistory | None = None,
) -> Opening:
    """Opens session `session_id` for the caller within the turn's admission, unless it is
    already theirs (a retried request, the next message of a client's conversation).

    `history` is given for a derived id, which comes back after its session was deleted: the
    session is then opened afresh, empty, and what a turn finishing during the deletion may
    have written under the id after it (a cached history, checkpoints) goes, so nothing of the
    deleted session reaches the new one (docs/adr/0063, amending 0038)."""

    async def open_session(db: AsyncSession) -> None:
        sessions = SessionRepository(db, principal.tenant_id)
        if await sessions.owned(session_id, principal.user_id) is not None:
            return
        try:
            async with db.begin_nested():  # a concurrent first message may open it first
                sessions.add(ChatSession(id=session_id, user_id=principal.user_id, title=title))
                await db.flush()
        except IntegrityError:
            if await sessions.owned(session_id, principal.user_id) is None:
                raise  # not theirs (cannot be, by derivation) or not a duplicate: a failure
            return
        if history is not None:
            await delete_thread(db, session_id)
            await history.drop(principal.tenant_id, session_id)

    return open_session


def derived_session_id(namespace: uuid.UUID, principal: Principal, name: str) -> uuid.UUID:
    """The session id a client's name for something (an Idempotency-Key, a conversation id)
    stands for: the same for the same caller and name, another for another user or tenant."""
    return uuid.uuid5(namespace, f"{principal.tenant_id}/{principal.user_id}/{name}")


def new_session_id(principal: Principal, key: str | None) -> uuid.UUID:
    """A new session's id: derived from the Idempotency-Key when there is one, so a retry of
    the request names the same session."""
    if key is None:
        return uuid.uuid4()
    return derived_session_id(_KEYED_SESSIONS, principal, key)


def conversation_session_id(principal: Principal, chat_id: str) -> uuid.UUID:
    """The session of a client's conversation: every message of it lands there."""
    return derived_session_id(_CHAT_SESSIONS, principal, chat_id)


class CompletionService:
    """Chat completions over the chat service."""

    def __init__(self, chat: ChatService, history_turns: int, history: CachedHistory) -> None:
        """`history` is the sessions' history cache, handed in (ADR 0070): a derived session
        id's leftovers are dropped from it when the session opens."""
        self.chat = chat
        self.history_turns = history_turns
        self.history = history

    async def complete(
        self,
        principal: Principal,
        body: CompletionRequest,
        session: uuid.UUID | None,
        key: str | None,
        conversation: ClientConversation | None = None,
    ) -> ChatCompletion:
        """One turn, answered as a whole completion."""
        request, opening = self._turn(principal, body, session, key, conversation)
        answer = await self.chat.answer(principal, request, key, opening=opening)
        return completion(answer)

    async def stream(
        self,
        principal: Principal,
        body: CompletionRequest,
        session: uuid.UUID | None,
        key: str | None,
        conversation: ClientConversation | None = None,
    ) -> StartedCompletion:
        """One turn, as completion chunks. Admission errors raise here, before the stream."""
        request, opening = self._turn(principal, body, session, key, conversation)
        started = await self.chat.stream(principal, request, key, opening=opening)
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        chunks = completion_chunks(started.events, started.turn_id, include_usage)
        return StartedCompletion(request.session_id, started.turn_id, chunks)

    def _turn(
        self,
        principal: Principal,
        body: CompletionRequest,
        session: uuid.UUID | None,
        key: str | None,
        conversation: ClientConversation | None,
    ) -> tuple[ChatRequest, Opening]:
        """The chat request for this completion, and the session to open with it (if any):
        the session the request names, else its client conversation's, else a new one."""
        if body.model != MODEL_ID:
            raise NotFound(
                f"The model {body.model!r} does not exist; GET /v1/models lists them.",
                code="model_not_found",
            )
        session = _named_session(session, body)
        messages = self._conversation(body)
        opening: Opening = None
        if session is None:
            if conversation is not None:
                session = conversation_session_id(principal, conversation.chat_id)
            else:
                session = new_session_id(principal, key)
            # A derived id may have been a deleted session's: its leftovers go when it opens.
            derived = conversation is not None or key is not None
            history = self.history if derived else None
            title = " ".join(snippet(messages[-1].content).split())[:TITLE_CHARS]
            opening = session_opening(principal, session, title or "New conversation", history)
        try:
            return ChatRequest(session_id=session, messages=messages), opening
        except ValidationError as exc:  # the schema checks the same bounds: not expected
            raise BadRequest(f"The conversation is not valid: {exc.errors()[0]['msg']}") from exc

    def _conversation(self, body: CompletionRequest) -> list[MessageIn]:
        """The user and assistant messages with text: the last is the user's question, the
        rest at most the history window's worth of exchanges."""
        kept = [
            MessageIn(role=m.role, content=m.text())
            for m in body.messages
            if m.role in ("user", "assistant") and m.text().strip()
        ]
        earlier = kept[:-1][-2 * self.history_turns :] if self.history_turns else []
        return [*earlier, kept[-1]]


def _named_session(header: uuid.UUID | None, body: CompletionRequest) -> uuid.UUID | None:
    """The session the request names, by header or `metadata.session_id` (both: the same)."""
    named = (body.metadata or {}).get("session_id")
    if named is None:
        return header
    try:
        session = uuid.UUID(named)
    except ValueError:
        raise BadRequest(
            "metadata.session_id is not a session id (a UUID).", code="invalid_session_id"
        ) from None
    if header is not None and header != session:
        raise BadRequest(
            "X-Threadline-Session and metadata.session_id name different sessions.",
            code="conflicting_session",
        )
    return session


def completion(answer: ChatResponse) -> ChatCompletion:
    """A `/chat` answer as a whole chat completion."""
    return ChatCompletion(
        id=f"chatcmpl-{answer.turn_id.hex}",
        created=int(time.time()),
        model=MODEL_ID,
        choices=[
            Choice(
                message=AssistantMessage(content=answer.answer),
                finish_reason=finish_reason(answer.status),
            )
        ],
        usage=CompletionUsage.of(answer.usage),
        threadline=ThreadlineExtension(
            session_id=answer.session_id,
            turn_id=answer.turn_id,
            status=answer.status,
            sources=answer.sources,
            query_composition=answer.query_composition,
            answer_model=answer.model,
        ),
    )

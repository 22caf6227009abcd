"""What each MCP tool does, for one caller: each calls the service the HTTP API calls for the
same thing (hybrid search as `/kb/search`, a turn as `/chat`, the session listings as
`/sessions`, the audit read as `/admin/audit/turns/{id}`), in the caller's tenant."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from pydantic import BaseModel

from app.access.scope import restrict_to_user
from app.audit import service as audit
from app.audit.schemas import AuditTurnRecord
from app.auth.principal import Principal
from app.config import Settings
from app.conversation.endpoints.session_schemas import (
    SessionPage,
    SessionResponse,
    TurnPage,
    TurnResponse,
)
from app.conversation.service import sessions
from app.conversation.service.chat import ChatService
from app.conversation.turn.schemas import ChatRequest, SourceOut
from app.core.errors import Forbidden
from app.core.redis import RedisHandle
from app.core.unit_of_work import Transactions
from app.knowledge import service as knowledge
from app.knowledge.schemas import SearchOut
from app.limits.search import admit_search
from app.openai_compat.service import new_session_id, session_opening
from app.retrieval.hybrid import HybridRetriever


class Answer(BaseModel):
    """An answer, stored as a turn of `session_id`; its `[n]` cite `sources`."""

    answer: str
    session_id: uuid.UUID
    turn_id: uuid.UUID
    status: str
    sources: list[SourceOut]


@dataclass(frozen=True)
class Toolbox:
    """The services the tools call, for one caller."""

    principal: Principal
    chat: ChatService
    transactions: Transactions
    """The tools' own door to the database (ADR 0070)."""
    settings: Settings
    retriever: HybridRetriever
    redis: RedisHandle

    async def search_knowledge(self, query: str, k: int) -> SearchOut:
        """The tenant's best-matching passages, within the user's searches a minute."""
        tenant = self.principal.tenant_id
        settings = self.settings
        await admit_search(self.redis, self.principal.user_id, settings.rate_limit_search_per_min)
        async with self.transactions(tenant) as db:
            # Only the collections the caller may see now (ADR 0078), as `/kb/search`.
            await restrict_to_user(
                db, tenant, self.principal.user_id, is_admin=self.principal.is_admin
            )
            hits = await knowledge.search(db, self.retriever, tenant, query, k=k)
        return SearchOut.of(hits)

    async def ask(self, question: str, session_id: uuid.UUID | None) -> Answer:
        """One turn, in the given session or a new one (opened with the turn)."""
        principal = self.principal
        opening = None
        if session_id is None:
            session_id = new_session_id(principal, None)
            title = " ".join(question.split())[:80]
            opening = session_opening(principal, session_id, title)
        request = ChatRequest(session_id=session_id, message=question)
        answer = await self.chat.answer(principal, request, None, opening=opening)
        return Answer(
            answer=answer.answer,
            session_id=answer.session_id,
            turn_id=answer.turn_id,
            status=answer.status,
            sources=answer.sources,
        )

    async def list_sessions(self, limit: int, cursor: str | None) -> SessionPage:
        """The caller's sessions, newest first."""
        async with self.transactions(self.principal.tenant_id) as db:
            items, next_cursor = await sessions.list_page(
                db, self.principal, limit=limit, cursor=cursor
            )
            return SessionPage(
                items=[SessionResponse.model_validate(s) for s in items], next_cursor=next_cursor
            )

    async def session_turns(
        self, session_id: uuid.UUID, limit: int, cursor: str | None
    ) -> TurnPage:
        """One of the caller's sessions' turns, newest first."""
        async with self.transactions(self.principal.tenant_id) as db:
            await restrict_to_user(
                db,
                self.principal.tenant_id,
                self.principal.user_id,
                is_admin=self.principal.is_admin,
            )
            items, next_cursor = await sessions.turns_page(
                db, self.principal, session_id, limit=limit, cursor=cursor
            )
            return TurnPage(
                items=[TurnResponse.model_validate(t) for t in items], next_cursor=next_cursor
            )

    async def audit_turn(self, turn_id: uuid.UUID) -> AuditTurnRecord:
        """A turn's full record for an admin; the read is logged in the audit log."""
        if not self.principal.is_admin:
            raise Forbidden("This requires the admin role.", code="admin_required")
        async with self.transactions(self.principal.tenant_id) as db:
            return await audit.read_turn(db, self.principal, turn_id)

"""What nodes need besides the state: services, passed as LangGraph's runtime context.

Never checkpointed; built once in lifespan and shared by every turn.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.conversation.history import HistoryStore
from app.core.db import COLLECTIONS, TENANT, collections_literal
from app.core.jobs import RUNNER, JobRunner
from app.embeddings.base import Embedder
from app.guardrails.policy import TenantPolicies
from app.llm.responder import Responder
from app.retrieval.base import Retriever
from app.retrieval.status import KnowledgeBaseStatus


@dataclass
class TurnContext:
    """The services every node of a turn uses: settings, stores, retriever, responder, policies."""

    settings: Settings
    sessionmaker: async_sessionmaker[AsyncSession]
    history: HistoryStore
    retriever: Retriever
    responder: Responder
    policies: TenantPolicies
    """Each tenant's guardrail/triage policy, cached."""
    embedder: Embedder
    """For the FAQ fast path (the retriever embeds on its own)."""
    kb_status: KnowledgeBaseStatus = field(default_factory=KnowledgeBaseStatus)
    jobs: JobRunner | None = None
    """Where jobs a turn enqueues after its commit go (the summary job); set once the
    lifespan has built the runner."""
    rewriter: Responder | None = None
    """The fast model for the follow-up rewrite (`THREADLINE_LLM_FAST_MODEL`); None: the
    responder's own model rewrites."""

    @asynccontextmanager
    async def transaction(
        self, tenant_id: str | uuid.UUID, *, collections: Sequence[uuid.UUID] | None = None
    ) -> AsyncIterator[AsyncSession]:
        """A database session scoped to the tenant (and, given `collections`, narrowed to
        those knowledge-base collections, ADR 0078), committed when the block ends without
        error."""
        async with self.sessionmaker() as db:
            db.info[TENANT] = tenant_id
            if collections is not None:
                db.info[COLLECTIONS] = collections_literal(collections)
            if self.jobs is not None:
                db.info[RUNNER] = self.jobs  # jobs enqueued here run after the commit
            async with db.begin():
                yield db

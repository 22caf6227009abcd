"""What nodes need besides the state: services, passed as LangGraph's runtime context; and
the turn's one read transaction before the model (ADR 0070).

Never checkpointed; built once in lifespan and shared by every turn.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.conversation.history import HistoryStore
from app.core.jobs import JobRunner
from app.core.unit_of_work import Transactions
from app.embeddings.base import Embedder
from app.guardrails.policy import TenantPolicies
from app.llm.responder import Responder
from app.retrieval.base import Retriever
from app.retrieval.status import KnowledgeBaseStatus

logger = logging.getLogger(__name__)


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

    @property
    def transactions(self) -> Transactions:
        """The turn's writes' door: a transaction of their own (follows a swapped
        `sessionmaker` and the `jobs` set after start-up)."""
        return Transactions(self.sessionmaker, self.jobs)

    def transaction(
        self, tenant_id: str | uuid.UUID, narrowed_to: Sequence[uuid.UUID] | None = None
    ) -> AbstractAsyncContextManager[AsyncSession]:
        """A database session scoped to the tenant (and narrowed to these collections, when
        given), committed when the block ends without error."""
        return self.transactions(tenant_id, narrowed_to)

    def reads(self, tenant_id: uuid.UUID) -> AbstractAsyncContextManager[AsyncSession]:
        """A read before the model: inside a run, the turn's one read transaction (opened by
        its first read, shared by every node up to the model call); outside one, a
        transaction of its own. Writes never go here: they own their transactions."""
        unit = TURN_READS.get()
        if unit is None or unit.tenant_id != tenant_id:
            return self.transaction(tenant_id)
        return unit.use()

    async def end_reads(self) -> None:
        """Commit the turn's read transaction, if one is open, and give back its connection:
        before any model call. A later read opens another."""
        unit = TURN_READS.get()
        if unit is not None:
            await unit.close()


class TurnReads:
    """The reads of one turn before its model call, in one transaction on one connection.

    Opened lazily (a turn whose reads the caches answer opens none), its uses serialised (a
    session runs one statement at a time; retrieval's searches take turns), committed by
    `close` — before the model is called, and at the latest when the run ends. A read that
    fails discards it (rolled back), so the next read starts a clean one."""

    def __init__(
        self, context: TurnContext, tenant_id: uuid.UUID, collections: Sequence[uuid.UUID]
    ) -> None:
        self.context = context
        self.tenant_id = tenant_id
        self.collections = list(collections)
        """What the turn may search: its transaction is narrowed to them from its start."""
        self._lock = asyncio.Lock()
        self._open: tuple[AsyncExitStack, AsyncSession] | None = None

    @asynccontextmanager
    async def use(self) -> AsyncIterator[AsyncSession]:
        """The shared transaction's session, for one read."""
        async with self._lock:
            if self._open is None:
                stack = AsyncExitStack()
                db = await stack.enter_async_context(
                    self.context.transaction(self.tenant_id, self.collections)
                )
                self._open = (stack, db)
            try:
                yield self._open[1]
            except BaseException as exc:
                try:
                    await self._end(exc)
                except Exception:  # a connection already lost: the read's own error stands
                    logger.warning("the turn's read transaction did not roll back", exc_info=True)
                raise

    async def close(self) -> None:
        """Commit what was read and release the connection (nothing open: nothing to do)."""
        async with self._lock:
            await self._end(None)

    async def _end(self, error: BaseException | None) -> None:
        if self._open is None:
            return
        stack, _ = self._open
        self._open = None
        if error is None:
            await stack.aclose()
        else:  # the transaction rolls back, the connection goes back to the pool
            await stack.__aexit__(type(error), error, error.__traceback__)


TURN_READS: ContextVar[TurnReads | None] = ContextVar("turn_reads", default=None)
"""The running turn's read transaction; set by the runner for the tasks of its run."""

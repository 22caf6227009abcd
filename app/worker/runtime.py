"""What a Celery worker process keeps for its whole life: one event loop, one engine.

Celery tasks are synchronous; `asyncio.run` per task would build an engine, a loop and the
pipeline's batchers for every document and throw them away, so nothing would ever be
shared. Instead each worker process runs one event loop in a daemon thread, with one
engine and one `IngestionDeps`, and each task hands its coroutine to that loop and waits.
Tasks running at the same time (the `threads` pool, or several processes' worth of
concurrency in one) then share the embedder's calls and the claim and index-write
transactions exactly as in an API process (docs/adr/0014, 0017).

The summary job (`app.conversation.pipeline.summary_job`) runs there too, with the configured chat
model
(`responder`, built on first use). The same loop runs the ingestion recovery
(`app.ingestion.recovery`): at start-up and then periodically it queues lost ingestions
again, through the broker. And it runs the retention
sweep beat schedules (`app.retention.tasks`), on the same engine, with the Redis history
cache the sweep clears. Everything is built by `app.bootstrap`, as the API's is.

The ingestion side (the embedder, checked against the stored vectors, and the recovery) is
built on first use, in the background at start: a model that will not load, or does not
match the database, stops ingestion, never the retention sweep.

Built in the process that runs tasks: a prefork child (`worker_process_init`), or the
worker's own process for the solo and threads pools (`worker_ready`). A process forked
from one that had a runtime builds its own (the pid is checked).

At SIGTERM (`hand_back`) the runtime stops its ingestions and gives their documents back,
as `threadline serve` does (docs/adr/0054, 0084): the tasks under way end at once and their
messages go back to the broker.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from app.config import Settings, get_settings

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

    from app.conversation.history import HistoryStore
    from app.core.redis import RedisHandle
    from app.ingestion.pipeline import IngestionDeps
    from app.ingestion.recovery import RecoveryLoop
    from app.llm.responder import Responder

logger = logging.getLogger(__name__)

T = TypeVar("T")

CONNECTIONS = 4
"""Concurrent documents share transactions: a few connections serve many of them."""

HAND_BACK_SECONDS = 5.0
"""At SIGTERM, how long the cancelled ingestions get to end before their documents are
handed back regardless (well inside a container's 30 s)."""


class WorkerRuntime:
    """One worker process's event loop (in a daemon thread) and what runs on it."""

    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    ingestion: IngestionDeps
    redis: RedisHandle
    history: HistoryStore
    _responder: Responder | None = None

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pid = os.getpid()
        self._ingestion_lock = asyncio.Lock()
        self._handlers: dict[str, Callable[..., Awaitable[Any]]] | None = None
        self.recovery: RecoveryLoop | None = None
        self.stopping = False
        """Set at SIGTERM: no ingestion starts here any more."""
        self._handing_back: Future[int] | None = None
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="threadline-worker-loop", daemon=True
        )
        self._thread.start()
        try:
            self.run(self._open())
        except BaseException:  # PostgreSQL away at start: the next task builds afresh
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
            raise

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        """Start `coroutine` on the process's loop; its result, to wait for."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the process's loop; block the calling thread until it ends."""
        return self.submit(coroutine).result()

    async def _open(self) -> None:
        from app.bootstrap import build_history, open_database
        from app.core.redis import build_redis

        settings = self.settings
        database = await open_database(settings, pool_size=CONNECTIONS, max_overflow=CONNECTIONS)
        self.engine = database.engine
        self.sessionmaker = database.sessionmaker
        self.redis = build_redis(settings)
        self.history = build_history(settings, self.redis)

    @property
    def responder(self) -> Responder:
        """The configured chat model, built on first use (for the summary job)."""
        if self._responder is None:
            from app.llm.providers import build_responder

            self._responder = build_responder(self.settings)
        return self._responder

    async def ingestion_handlers(self) -> dict[str, Callable[..., Awaitable[Any]]]:
        """The ingestion jobs' handlers, built on first use: the embedder is loaded and checked
        against the stored vectors then, and the recovery of lost ingestions starts. The
        retention sweep never waits for (or fails with) the model."""
        async with self._ingestion_lock:
            if self._handlers is None:
                from app.bootstrap import build_recovery, create_celery, open_ingestion
                from app.core.jobs import CeleryJobs
                from app.embeddings.space import keep_recorded_embedder
                from app.ingestion.jobs import ingestion_handlers

                settings = await keep_recorded_embedder(self.settings, self.sessionmaker)
                # The CPU steps run in a thread here: a worker has no request latency to protect.
                self.ingestion = await open_ingestion(settings, self.sessionmaker)
                self._handlers = ingestion_handlers(self.ingestion)
                if self.stopping:  # SIGTERM while the model loaded: claim nothing
                    self.ingestion.leases.begin_stop()
                jobs = CeleryJobs(create_celery(settings))  # lost ingestions go back to the broker
                self.recovery = build_recovery(settings, lambda: self.sessionmaker, jobs)
                self.recovery.start()
                logger.info("worker ingestion ready", extra={"owner": self.ingestion.leases.owner})
            return self._handlers

    def hand_back(self) -> None:
        """SIGTERM: take no new document, cancel the ingestions under way and hand their
        documents back (`app.ingestion.pipeline.stop`), without waiting. Called from the
        signal handler: it only schedules work on the loop."""
        if self.stopping:
            return
        self.stopping = True
        if self._handlers is not None:
            from app.ingestion.pipeline import stop

            self.ingestion.leases.begin_stop()  # at once, before the loop runs `stop`
            self._handing_back = self.submit(stop(self.ingestion, HAND_BACK_SECONDS))

    def wait_handed_back(self) -> None:
        """Block until the documents are handed back (bounded): a message returned to the
        broker before that would find its document still claimed here and be skipped."""
        if self._handing_back is not None:
            try:
                self._handing_back.result(timeout=2 * HAND_BACK_SECONDS)
            except Exception:  # their leases lapse and the recovery takes them then
                logger.warning("ingestions not handed back", exc_info=True)

    def close(self) -> None:
        """Stop the recovery, close the connections and the loop (worker shutdown)."""

        async def _close() -> None:
            if self.recovery is not None:
                await self.recovery.stop()
            await self.redis.close()
            await self.engine.dispose()

        try:
            self.submit(_close()).result(timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)


_lock = threading.Lock()
_runtime: WorkerRuntime | None = None


def worker_runtime() -> WorkerRuntime:
    """This process's runtime, built on first use."""
    global _runtime
    with _lock:
        if _runtime is None or _runtime.pid != os.getpid():
            _runtime = WorkerRuntime(get_settings())
            logger.info("worker runtime ready")
        return _runtime


def hand_back_ingestions() -> None:
    """SIGTERM (from the signal handler): this process's runtime, if built, hands its
    ingestions back. Never blocks: no lock is taken (the interrupted code may hold it)."""
    runtime = _runtime
    if runtime is not None and runtime.pid == os.getpid():
        runtime.hand_back()


def close_worker_runtime() -> None:
    """Close this process's runtime, if it has one (worker shutdown)."""
    global _runtime
    with _lock:
        if _runtime is not None and _runtime.pid == os.getpid():
            _runtime.close()
        _runtime = None

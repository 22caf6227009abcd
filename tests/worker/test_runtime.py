"""A Celery worker process keeps one event loop and one engine: tasks running at the same
time (the threads pool) share the ingestion pipeline's batches there too (issue 14)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.db import TENANT, scope_to_tenant
from app.embeddings.space import EmbeddingMismatchError
from app.ingestion.jobs import INGEST
from app.ingestion.uploads import from_bytes
from app.knowledge.service import add_document
from app.models import ChatSession, KbDocument, QueryHistory
from app.retention.policy import set_policy
from app.worker import tasks
from app.worker.runtime import WorkerRuntime
from tests.factories import make_session, make_tenant, make_turn, make_user

pytestmark = pytest.mark.committed


@pytest.fixture
def runtime(settings: Settings) -> Iterator[WorkerRuntime]:
    built = WorkerRuntime(settings)
    try:
        yield built
    finally:
        built.close()


async def test_concurrent_tasks_of_a_worker_process_share_its_loop_and_transactions(
    sessionmaker: async_sessionmaker[AsyncSession], runtime: WorkerRuntime, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    ids = []
    for i in range(12):
        async with sessionmaker() as db, db.begin():
            db.info[TENANT] = tenant.id
            document, _ = await add_document(
                db,
                tenant.id,
                from_bytes(f"Worker document {i}.".encode(), None),
                title=None,
                external_id=None,
                metadata={},
                created_by=None,
                enqueue=False,
            )
            ids.append(document.id)
    transactions: list[Any] = []
    listener = lambda connection: transactions.append(connection)  # noqa: E731
    event.listen(runtime.engine.sync_engine, "begin", listener)
    handler = runtime.run(runtime.ingestion_handlers())[INGEST]

    def task(oid: uuid.UUID) -> str:  # what the Celery task does, in a pool thread
        async def run() -> str:
            return str(await handler(kind="kb", tenant_id=str(tenant.id), object_id=str(oid)))

        return runtime.run(run())

    try:
        with ThreadPoolExecutor(max_workers=12) as pool:
            statuses = await asyncio.wrap_future(
                asyncio.get_running_loop().run_in_executor(None, lambda: list(pool.map(task, ids)))
            )
    finally:
        event.remove(runtime.engine.sync_engine, "begin", listener)

    assert statuses == ["ready"] * 12
    # One claim and one index write per document, as `asyncio.run` per task did: 24.
    assert len(transactions) <= 8, len(transactions)
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant.id
        rows = await db.scalars(select(KbDocument.status).where(KbDocument.id.in_(ids)))
        assert set(rows) == {"ready"}


async def test_the_retention_sweep_task_runs_on_the_worker_process_loop_and_engine(
    runtime: WorkerRuntime, db: AsyncSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = await make_tenant(db)
    await scope_to_tenant(db, tenant.id)
    await set_policy(db, tenant.id, 1)
    await db.commit()
    chat = await make_session(db, await make_user(db, tenant))
    await scope_to_tenant(db, tenant.id)
    db.add(
        QueryHistory(
            tenant_id=tenant.id,
            session_id=chat.id,
            user_id=chat.user_id,
            user_query="old",
            answer="a",
            status="complete",
            created_at=datetime.now(UTC) - timedelta(days=2),
        )
    )
    await db.commit()
    threads: list[str] = []
    listener = lambda connection: threads.append(threading.current_thread().name)  # noqa: E731
    event.listen(runtime.engine.sync_engine, "begin", listener)
    monkeypatch.setattr(tasks, "worker_runtime", lambda: runtime)

    def sweep_twice() -> list[dict[str, int]]:  # as beat's deliveries do, in a pool thread
        return [tasks.retention_sweep(), tasks.retention_sweep()]

    try:
        first, second = await asyncio.get_running_loop().run_in_executor(None, sweep_twice)
    finally:
        event.remove(runtime.engine.sync_engine, "begin", listener)

    assert first["turns"] >= 1 and set(first) == set(second)
    await scope_to_tenant(db, tenant.id)
    left = await db.scalars(select(QueryHistory.id).where(QueryHistory.tenant_id == tenant.id))
    assert list(left) == []
    # Both runs used the process's one engine, on its one loop: no `asyncio.run` per call.
    assert threads and set(threads) == {"threadline-worker-loop"}, threads


async def test_the_sweep_runs_when_the_ingestion_side_cannot_start(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model that will not load, or does not match the stored vectors, stops ingestion with
    its reason; the retention sweep runs all the same."""
    import app.bootstrap

    async def refuse(*_: Any, **__: Any) -> Any:
        raise EmbeddingMismatchError("the vectors were made by another model")

    monkeypatch.setattr(app.bootstrap, "open_ingestion", refuse)
    runtime = WorkerRuntime(settings)
    monkeypatch.setattr(tasks, "worker_runtime", lambda: runtime)
    try:
        loop = asyncio.get_running_loop()
        swept = await loop.run_in_executor(None, tasks.retention_sweep)
        assert set(swept) == {"turns", "checkpoints", "orphan_checkpoints", "refresh_tokens"}
        with pytest.raises(EmbeddingMismatchError, match="another model"):
            await loop.run_in_executor(None, lambda: tasks.ingest("kb", str(uuid.uuid4()), "x"))
    finally:
        runtime.close()


async def test_the_summary_task_folds_a_session_on_the_worker_loop(
    runtime: WorkerRuntime, db: AsyncSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a broker, the summary job is a Celery task: it folds the turns that left the
    window with the worker's own chat model (rules, for the extractive default), once."""
    chat = await make_session(db, await make_user(db, await make_tenant(db)))
    window, batch = runtime.history.limit, runtime.settings.summary_batch_turns
    for i in range(window + batch):
        await make_turn(db, chat, user_query=f"Question {i}?", answer=f"Answer {i}.")
    await db.commit()
    monkeypatch.setattr(tasks, "worker_runtime", lambda: runtime)

    def summarize_twice() -> list[str]:  # the second delivery finds nothing due
        return [tasks.summarize(str(chat.tenant_id), str(chat.id)) for _ in range(2)]

    outcomes = await asyncio.get_running_loop().run_in_executor(None, summarize_twice)

    assert outcomes == ["folded", "not_due"]
    await scope_to_tenant(db, chat.tenant_id)
    stored = await db.scalar(
        select(ChatSession)
        .where(ChatSession.id == chat.id)
        .execution_options(populate_existing=True)
    )
    assert stored is not None and stored.summarized_turns == batch
    assert "Question 0?" in (stored.summary or "") and "Question 5?" not in (stored.summary or "")

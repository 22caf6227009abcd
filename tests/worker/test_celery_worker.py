"""Real `celery worker` processes on a Redis broker, against the test database as the
application role (RLS on): one ingests an uploaded document end to end; one killed with
SIGKILL in the middle of a document is relieved by another once its lease lapses; one sent
SIGTERM in the middle of a document hands it back and exits at once, and the next worker
finishes it exactly once."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.bootstrap import create_celery
from app.config import Settings
from app.core.db import TENANT
from app.core.jobs import CeleryJobs
from app.ingestion.jobs import ingest_job
from app.ingestion.uploads import from_bytes
from app.knowledge.service import add_document
from app.main import create_app
from app.models import KbChunk, KbDocument
from tests.conftest import TEST_JWT_SECRET
from tests.factories import login, make_tenant, make_user
from tests.services import ServiceMissing, _private_redis, require_service

pytestmark = pytest.mark.committed

ROOT = Path(__file__).resolve().parents[2]
WORKER_START_SECONDS = 60.0  # imports and start-up on a busy 2-core machine
INGEST_SECONDS = 60.0


@pytest.fixture(scope="module")
def broker() -> Iterator[str]:
    """A private redis-server: the workers' queue is nobody else's, and nothing of theirs
    is left in the shared Redis."""
    binary = shutil.which("redis-server")
    if binary is None:
        require_service("redis-server is not installed (the Celery workers' broker)")
    try:
        yield from _private_redis(binary)
    except ServiceMissing as exc:
        require_service(str(exc))


class Workers:
    """`celery worker` processes started by one test; each is killed by its pid at the end."""

    def __init__(self, settings: Settings, broker: str, logs: Path) -> None:
        self.settings = settings
        self.broker = broker
        self.logs = logs
        self.started: list[subprocess.Popen[bytes]] = []

    def env(self, **extra: str) -> dict[str, str]:
        """The variables the application reads, pointing at the test database and Redis."""
        names = ("THREADLINE_", "DATABASE_URL", "REDIS_URL", "CELERY_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(names)}
        settings = self.settings
        assert settings.database_url is not None
        env.update(
            THREADLINE_ENV="test",
            DATABASE_URL=settings.database_url,
            THREADLINE_APP_DB_ROLE=settings.app_db_role,
            THREADLINE_APP_DB_PASSWORD=settings.app_db_password.get_secret_value(),
            THREADLINE_JWT_SECRET=TEST_JWT_SECRET,
            REDIS_URL=settings.redis_url or "",
            THREADLINE_REDIS_PREFIX=settings.redis_prefix,
            CELERY_BROKER_URL=self.broker,
            THREADLINE_LOG_JSON="false",
            THREADLINE_EMBEDDER=settings.embedder,  # the space the test database recorded
            **extra,
        )
        return env

    def start(
        self, name: str, env: dict[str, str] | None = None, pool: str = "solo", concurrency: int = 1
    ) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("wb")
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.worker.worker_app",
            "worker",
            "--pool",
            pool,
            "--concurrency",
            str(concurrency),
            "--hostname",
            f"{name}@threadline-test",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
            "--loglevel",
            "INFO",
        ]
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=self.env(**(env or {})),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.started.append(process)
        return process

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    async def wait_ready(self, name: str, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + WORKER_START_SECONDS
        while "ready." not in self.log(name):
            assert process.poll() is None, f"worker {name} exited:\n{self.log(name)}"
            assert time.monotonic() < deadline, f"worker {name} not ready:\n{self.log(name)}"
            await asyncio.sleep(0.1)

    def stop_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)


@pytest.fixture
def workers(
    sessionmaker: async_sessionmaker[AsyncSession],  # torn down after the workers stop
    settings: Settings,
    broker: str,
    tmp_path: Path,
) -> Iterator[Workers]:
    started = Workers(settings, broker, tmp_path)
    try:
        yield started
    finally:
        started.stop_all()


async def _document(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: uuid.UUID, oid: uuid.UUID
) -> KbDocument:
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant
        document = await db.get(KbDocument, (tenant, oid))
    assert document is not None
    return document


async def _wait_for(
    sessionmaker: async_sessionmaker[AsyncSession],
    tenant: uuid.UUID,
    oid: uuid.UUID,
    done: Any,
    seconds: float,
    why: str,
) -> KbDocument:
    deadline = time.monotonic() + seconds
    while True:
        document = await _document(sessionmaker, tenant, oid)
        if done(document):
            return document
        assert time.monotonic() < deadline, f"{why}: {document.status} {document.error}"
        await asyncio.sleep(0.1)


@pytest.fixture
async def api(settings: Settings, broker: str) -> AsyncIterator[httpx.AsyncClient]:
    """The API with the broker configured: its jobs go to the workers."""
    application = create_app(settings.model_copy(update={"celery_broker_url": broker}))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://threadline.test") as c:
            yield c


async def test_a_celery_worker_ingests_uploaded_documents_end_to_end_on_one_loop(
    sessionmaker: async_sessionmaker[AsyncSession],
    workers: Workers,
    api: httpx.AsyncClient,
    db: AsyncSession,
) -> None:
    # The pool docker compose runs: tasks in threads, all on the process's one event loop.
    worker = workers.start("threads", pool="threads", concurrency=4)
    await workers.wait_ready("threads", worker)
    tenant = await make_tenant(db)
    admin = await login(api, await make_user(db, tenant, role="admin"))
    ids = []
    for topic in ("descaling espresso machines", "sharpening kitchen knives"):
        response = await api.post(
            "/kb/documents",
            json={"title": topic, "text": f"This guide is about {topic}, step by step."},
            headers=admin.headers,
        )
        assert response.status_code == 202, response.text
        ids.append(uuid.UUID(response.json()["id"]))

    for oid in ids:
        document = await _wait_for(
            sessionmaker,
            tenant.id,
            oid,
            lambda d: d.status in ("ready", "failed"),
            INGEST_SECONDS,
            "not ingested by the worker",
        )
        assert (document.status, document.error, document.chunk_count) == ("ready", None, 1)
        assert (document.claimed_by, document.lease_expires_at) == (None, None)
        assert document.attempts == 0
    found = await api.post(
        "/kb/search", json={"query": "sharpening knives", "k": 1}, headers=admin.headers
    )
    assert found.json()["items"][0]["document_id"] == str(ids[1])
    # One event loop, engine and set of batchers for the worker process, not one per task.
    assert workers.log("threads").count("worker runtime ready") == 1, workers.log("threads")


async def _submit_manual(
    sessionmaker: async_sessionmaker[AsyncSession],
    settings: Settings,
    broker: str,
    tenant: uuid.UUID,
    topic: str = "descaling cycle",
) -> KbDocument:
    """A document of many chunks, stored `pending`, its ingestion job sent to the broker."""
    body = " ".join(f"Paragraph {i} explains how the {topic} works." for i in range(200))
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant
        document, _ = await add_document(
            db,
            tenant,
            from_bytes(body.encode(), "manual.txt"),
            title="Manual",
            external_id=None,
            metadata={},
            created_by=None,
            enqueue=False,
        )
    CeleryJobs(create_celery(settings.model_copy(update={"celery_broker_url": broker}))).submit(
        ingest_job("kb", tenant, document.id)
    )
    return document


async def test_a_worker_killed_mid_document_is_relieved_by_another_once_its_lease_lapses(
    sessionmaker: async_sessionmaker[AsyncSession],
    workers: Workers,
    settings: Settings,
    broker: str,
    db: AsyncSession,
) -> None:
    lease = {
        "THREADLINE_INGESTION_LEASE_SECONDS": "1.5",
        "THREADLINE_INGESTION_RECOVERY_SECONDS": "0.3",
    }
    doomed = workers.start("doomed", {"THREADLINE_TEST_EMBED_DELAY": "600", **lease})
    tenant = await make_tenant(db)
    document = await _submit_manual(sessionmaker, settings, broker, tenant.id)
    claimed = await _wait_for(
        sessionmaker,
        tenant.id,
        document.id,
        lambda d: d.claimed_by is not None,
        WORKER_START_SECONDS + INGEST_SECONDS,
        "the first worker never claimed the document",
    )
    assert claimed.status == "processing"
    assert doomed.poll() is None
    os.kill(doomed.pid, signal.SIGKILL)  # mid-document: it is waiting for the model
    doomed.wait(timeout=10)
    killed_at = time.monotonic()

    workers.start("relief", lease)
    ready = await _wait_for(
        sessionmaker,
        tenant.id,
        document.id,
        lambda d: d.status in ("ready", "failed"),
        WORKER_START_SECONDS + INGEST_SECONDS,
        "the second worker never finished the document",
    )
    elapsed = time.monotonic() - killed_at
    print(f"\nkilled mid-document -> ready on the second worker: {elapsed:.2f} s")

    assert (ready.status, ready.error) == ("ready", None)
    assert (ready.claimed_by, ready.lease_expires_at, ready.attempts) == (None, None, 0)
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant.id
        chunks = (
            await db.scalars(select(KbChunk.text).where(KbChunk.document_id == document.id))
        ).all()
    assert len(chunks) == ready.chunk_count > 1
    relief_log = workers.log("relief")
    assert "succeeded" in relief_log and "'ready'" in relief_log, relief_log
    assert "'ready'" not in workers.log("doomed")


def _queued(broker: str) -> tuple[int, int]:
    """Messages waiting in the broker's queue, and delivered but not acknowledged."""
    client = redis.Redis.from_url(broker)
    try:
        return int(client.llen("celery")), int(client.hlen("unacked"))
    finally:
        client.close()


def _empty_queue(broker: str) -> None:
    """Drop what earlier tests left in the broker (a killed worker's unacked message)."""
    client = redis.Redis.from_url(broker)
    try:
        client.delete("celery", "unacked", "unacked_index")
    finally:
        client.close()


def _all_done(broker: str, log: str) -> bool:
    """Nothing left in the broker, and every task the worker received has ended."""
    return _queued(broker) == (0, 0) and log.count(" received") == log.count(" succeeded in ")


@pytest.mark.parametrize("pool", ["threads", "solo", "prefork"])
async def test_sigterm_mid_document_hands_it_back_and_the_next_worker_finishes_it_once(
    sessionmaker: async_sessionmaker[AsyncSession],
    workers: Workers,
    settings: Settings,
    broker: str,
    db: AsyncSession,
    pool: str,
) -> None:
    # A lease and a recovery interval far longer than the test: neither the lease lapsing
    # nor a periodic scan can be what finishes the documents; only the hand-back can.
    slow = {
        "THREADLINE_INGESTION_LEASE_SECONDS": "600",
        "THREADLINE_INGESTION_RECOVERY_SECONDS": "600",
    }
    _empty_queue(broker)
    stopping = workers.start(
        "stopping", {"THREADLINE_TEST_EMBED_DELAY": "600", **slow}, pool=pool, concurrency=2
    )
    tenant = await make_tenant(db)
    first = await _submit_manual(sessionmaker, settings, broker, tenant.id)
    await _wait_for(
        sessionmaker,
        tenant.id,
        first.id,
        lambda d: d.claimed_by is not None,
        WORKER_START_SECONDS + INGEST_SECONDS,
        "the first worker never claimed the document",
    )
    # A second one behind it: under way too (threads, prefork) or received and waiting (solo).
    second = await _submit_manual(sessionmaker, settings, broker, tenant.id, "water filter")
    await asyncio.sleep(1.0)  # well into the first document: waiting for the model
    os.kill(stopping.pid, signal.SIGTERM)
    sent_at = time.monotonic()
    try:
        code = await asyncio.to_thread(stopping.wait, timeout=30)  # a container's grace
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running 30 s after SIGTERM:\n{workers.log('stopping')}")
    print(f"\nSIGTERM mid-document -> worker exited after {time.monotonic() - sent_at:.2f} s")
    assert code == 0, workers.log("stopping")

    for oid in (first.id, second.id):
        handed = await _document(sessionmaker, tenant.id, oid)
        # Handed back: nobody holds it and the interrupted attempt does not count.
        assert (handed.claimed_by, handed.lease_expires_at, handed.attempts) == (None, None, 0)
        assert handed.status in ("pending", "processing")
    assert (await _document(sessionmaker, tenant.id, first.id)).status == "processing"
    # Their messages are back in the queue (acks_late, rejected and requeued), not lost.
    assert _queued(broker) == (2, 0), workers.log("stopping")

    workers.start("next", slow, pool=pool, concurrency=2)
    for oid in (first.id, second.id):
        ready = await _wait_for(
            sessionmaker,
            tenant.id,
            oid,
            lambda d: d.status in ("ready", "failed"),
            WORKER_START_SECONDS + INGEST_SECONDS,
            "the next worker never finished the document",
        )
        assert (ready.status, ready.error) == ("ready", None)
        assert (ready.claimed_by, ready.lease_expires_at, ready.attempts) == (None, None, 0)
        async with sessionmaker() as session, session.begin():
            session.info[TENANT] = tenant.id
            ordinals = (
                await session.scalars(select(KbChunk.ordinal).where(KbChunk.document_id == oid))
            ).all()
        assert sorted(ordinals) == list(range(ready.chunk_count))  # each chunk once
        assert ready.chunk_count > 1
    # Each ingested to the end once: another job for it (the next worker's start-up scan
    # may queue one too) found it claimed or ready and skipped it.
    deadline = time.monotonic() + INGEST_SECONDS
    while not _all_done(broker, next_log := workers.log("next")):
        assert time.monotonic() < deadline, next_log
        await asyncio.sleep(0.1)
    assert next_log.count("'ready'") == 2, next_log
    assert "'ready'" not in workers.log("stopping")


@pytest.mark.parametrize("pool", ["threads", "solo", "prefork"])
async def test_a_worker_that_has_ingested_stops_at_sigterm(
    sessionmaker: async_sessionmaker[AsyncSession],
    workers: Workers,
    settings: Settings,
    broker: str,
    db: AsyncSession,
    pool: str,
) -> None:
    """An idle worker that has run a task stops at once at SIGTERM. The solo pool sends
    `worker_process_init` in the worker's own process, and the prefork children's SIGTERM
    handler replaced Celery's there: after its first task a solo worker ignored SIGTERM
    until it was killed (ten seconds of every test teardown here, a container's grace)."""
    _empty_queue(broker)
    worker = workers.start("idle", pool=pool, concurrency=2)
    tenant = await make_tenant(db)
    document = await _submit_manual(sessionmaker, settings, broker, tenant.id)
    await _wait_for(
        sessionmaker,
        tenant.id,
        document.id,
        lambda d: d.status in ("ready", "failed"),
        WORKER_START_SECONDS + INGEST_SECONDS,
        "the worker never ingested the document",
    )
    worker.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.to_thread(worker.wait, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running 15 s after SIGTERM:\n{workers.log('idle')}")
    assert code == 0, workers.log("idle")
    assert "Warm shutdown" in workers.log("idle")

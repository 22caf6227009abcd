"""Issue 29 through the Celery worker path: a real `celery worker` reads a Word document,
a workbook and an e-book uploaded through the API, and each fact is found by `/kb/search`
where it is."""

from __future__ import annotations

import uuid

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tests.factories import login, make_tenant, make_user
from tests.knowledge.format_files import SAMPLES
from tests.worker.test_celery_worker import (  # noqa: F401 (fixtures)
    INGEST_SECONDS,
    Workers,
    _wait_for,
    api,
    broker,
    workers,
)

pytestmark = pytest.mark.committed


async def test_a_celery_worker_reads_each_format_and_keeps_its_locations(
    sessionmaker: async_sessionmaker[AsyncSession],
    workers: Workers,  # noqa: F811
    api: httpx.AsyncClient,  # noqa: F811
    db: AsyncSession,
) -> None:
    worker = workers.start("formats")
    await workers.wait_ready("formats", worker)
    tenant = await make_tenant(db)
    admin = await login(api, await make_user(db, tenant, role="admin"))
    samples = [SAMPLES[kind]() for kind in ("docx", "xlsx", "epub", "pdf")]
    for sample in samples:
        response = await api.post(
            "/kb/documents", files={"file": ("upload", sample.data)}, headers=admin.headers
        )
        assert response.status_code == 202, response.text
        document = await _wait_for(
            sessionmaker,
            tenant.id,
            uuid.UUID(response.json()["id"]),
            lambda d: d.status in ("ready", "failed"),
            INGEST_SECONDS,
            "not ingested by the worker",
        )
        assert (document.status, document.error) == ("ready", None)
        assert document.content_type == sample.content_type
        found = await api.post(
            "/kb/search", json={"query": sample.query, "k": 1}, headers=admin.headers
        )
        (hit,) = found.json()["items"]
        assert sample.fact in hit["snippet"]
        assert hit["location"] == sample.location

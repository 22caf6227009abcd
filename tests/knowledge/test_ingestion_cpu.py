"""Hostile uploads: NUL characters ingest, limits answer clearly, and a large file is
prepared in a worker process while the API goes on answering."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.ingestion.offload import PreparePool
from app.ingestion.prepare import Prepared, PrepareOptions, prepare
from app.models import Attachment, AttachmentChunk
from tests.factories import LoggedIn, login, make_tenant, make_user
from tests.knowledge.files import make_paged_pdf, make_pdf

pytestmark = pytest.mark.committed

WAIT_STEPS = 600  # x 0.1 s: a spawned worker process starts well within a minute


async def _owner(client: httpx.AsyncClient, db: AsyncSession) -> LoggedIn:
    return await login(client, await make_user(db, await make_tenant(db)))


async def _attach(client: httpx.AsyncClient, who: LoggedIn, name: str, data: bytes) -> str:
    response = await client.post("/attachments", files={"file": (name, data)}, headers=who.headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _processed(app: FastAPI, client: httpx.AsyncClient, who: LoggedIn, oid: str) -> dict:  # type: ignore[type-arg]
    await app.state.resources.jobs.drain()
    response = await client.get(f"/attachments/{oid}", headers=who.headers)
    assert response.status_code == 200
    return response.json()  # type: ignore[no-any-return]


def _prose(size: int) -> bytes:
    line = b"The warehouse in Porto ships orders every Tuesday and Friday.\n\n"
    return (line * (size // len(line) + 1))[:size]


@pytest.fixture
async def workers(app: FastAPI) -> AsyncIterator[None]:
    """The app's preparer as in production: worker processes, not the test's fallback."""
    ingestion = app.state.resources.ingestion
    previous, ingestion.preparer = ingestion.preparer, PreparePool(1)
    yield
    await asyncio.to_thread(ingestion.preparer.shutdown)
    ingestion.preparer = previous


async def test_a_nul_after_the_first_64_kib_of_a_text_file_is_stripped_and_ingested(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, workers: None
) -> None:
    owner = await _owner(client, db)
    data = _prose(70_000) + b"Invoice\x00 number 7 is paid.\n\nThe end."
    attachment = await _attach(client, owner, "nul.txt", data)
    details = await _processed(app, client, owner, attachment)
    assert details["status"] == "ready", details
    await scope_to_tenant(db, owner.user.tenant_id)
    stored = await db.scalar(select(Attachment.text))
    chunks = list(await db.scalars(select(AttachmentChunk.text)))
    await db.commit()
    assert stored is not None and "Invoice number 7 is paid." in stored
    assert "\x00" not in stored
    assert any("Invoice number 7 is paid." in chunk for chunk in chunks)


async def test_a_nul_inside_pdf_text_is_stripped_and_ingested(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    owner = await _owner(client, db)
    pdf = make_pdf("The notice period is\\000 ninety days.")  # \000: a NUL in the PDF string
    attachment = await _attach(client, owner, "nul.pdf", pdf)
    details = await _processed(app, client, owner, attachment)
    assert details["status"] == "ready", details
    await scope_to_tenant(db, owner.user.tenant_id)
    stored = await db.scalar(select(Attachment.text))
    await db.commit()
    assert stored == "The notice period is ninety days."


async def test_a_text_over_the_character_limit_is_refused_at_upload(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    owner = await _owner(client, db)
    resources = app.state.resources
    resources.settings = resources.settings.model_copy(update={"max_document_chars": 1000})
    refused = await client.post(
        "/attachments", files={"file": ("long.txt", _prose(1001))}, headers=owner.headers
    )
    assert refused.status_code == 413
    error = refused.json()["error"]
    assert error["code"] == "document_too_long"
    assert "limit is 1000" in error["message"] and error["request_id"]
    accepted = await client.post(
        "/attachments", files={"file": ("short.txt", _prose(1000))}, headers=owner.headers
    )
    assert accepted.status_code == 201
    await scope_to_tenant(db, owner.user.tenant_id)
    assert len(list(await db.scalars(select(Attachment.id)))) == 1
    await db.commit()


async def test_a_pdf_over_the_page_limit_fails_with_a_readable_error(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    owner = await _owner(client, db)
    app.state.resources.ingestion.max_pages = 2
    pdf = make_paged_pdf("Page one.", "Page two.", "Page three.")
    details = await _processed(app, client, owner, await _attach(client, owner, "long.pdf", pdf))
    assert details["status"] == "failed"
    assert details["error"] == "The PDF has 3 pages; the limit is 2."


async def test_a_pdf_whose_text_is_over_the_character_limit_fails_with_a_readable_error(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    owner = await _owner(client, db)
    app.state.resources.ingestion.max_chars = 20
    pdf = make_paged_pdf("Page one is short.", "Page two makes it too long.")
    details = await _processed(app, client, owner, await _attach(client, owner, "a.pdf", pdf))
    assert details["status"] == "failed"
    assert details["error"] == "The document's text is longer than the limit of 20 characters."


def paused_prepare(folder: str, source: bytes, options: PrepareOptions) -> Prepared:
    """`prepare`, in a worker: records its process id, then waits for the test's go."""
    (Path(folder) / "pid").write_text(str(os.getpid()))
    go = Path(folder) / "go"
    for _ in range(WAIT_STEPS):
        if go.exists():
            break
        time.sleep(0.1)
    return prepare(source, options)


async def _until(path: Path) -> None:
    for _ in range(WAIT_STEPS):
        if await asyncio.to_thread(path.exists):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{path} never appeared")


async def test_a_large_upload_is_prepared_in_another_process_while_the_api_answers(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, tmp_path: Path
) -> None:
    owner = await _owner(client, db)
    ingestion = app.state.resources.ingestion
    previous = ingestion.preparer
    ingestion.preparer = PreparePool(1, work=partial(paused_prepare, str(tmp_path)))
    try:
        attachment = await _attach(client, owner, "big.txt", _prose(200_000))
        await _until(tmp_path / "pid")
        # The document is mid-preparation in the worker: the API still answers everything.
        assert int((tmp_path / "pid").read_text()) != os.getpid()
        assert (await client.get("/healthz")).status_code == 200
        during = await client.get(f"/attachments/{attachment}", headers=owner.headers)
        assert during.json()["status"] == "processing"
        (tmp_path / "go").touch()
        details = await _processed(app, client, owner, attachment)
        assert details["status"] == "ready"
        assert details["chunk_count"] > 1
    finally:
        (tmp_path / "go").touch()
        await asyncio.to_thread(ingestion.preparer.shutdown)
        ingestion.preparer = previous


def dying_prepare(folder: str, source: bytes, options: PrepareOptions) -> Prepared:
    """The first call kills its worker process (as the OOM killer would); later ones work."""
    marker = Path(folder) / "died"
    if not marker.exists():
        marker.touch()
        os._exit(1)
    return prepare(source, options)


async def test_a_worker_process_that_dies_is_replaced_and_the_document_retried(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, tmp_path: Path
) -> None:
    owner = await _owner(client, db)
    ingestion = app.state.resources.ingestion
    previous, delay = ingestion.preparer, ingestion.retry_delay
    ingestion.preparer = PreparePool(1, work=partial(dying_prepare, str(tmp_path)))
    ingestion.retry_delay = 0.01
    try:
        details = await _processed(
            app, client, owner, await _attach(client, owner, "big.txt", _prose(50_000))
        )
        assert (tmp_path / "died").exists()
        assert details["status"] == "ready", details
    finally:
        await asyncio.to_thread(ingestion.preparer.shutdown)
        ingestion.preparer, ingestion.retry_delay = previous, delay

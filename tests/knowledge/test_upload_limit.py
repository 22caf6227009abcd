"""`THREADLINE_MAX_UPLOAD_BYTES` is the limit of the uploaded file's bytes, on both upload
endpoints: a file of exactly the limit is accepted and one byte more is 413, whatever the
length of its name; the multipart envelope around the file is allowed for separately."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.middleware import MULTIPART_ENVELOPE_BYTES
from app.main import create_app
from tests.factories import LoggedIn, login, make_tenant, make_user

pytestmark = pytest.mark.committed

LIMIT = 16 * 1024
NAMES = {
    "short": "a.txt",
    "255 characters, not ASCII": "é" * 251 + ".txt",
    "4000 characters": "n" * 3996 + ".txt",
}


@pytest.fixture
async def small_limit_app(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[FastAPI]:
    limited = settings.model_copy(update={"max_upload_bytes": LIMIT, "ingest_workers": 0})
    application = create_app(limited)
    async with application.router.lifespan_context(application):
        application.state.resources.use_sessionmaker(sessionmaker)
        yield application
        await application.state.resources.jobs.drain()


def _text(size: int) -> bytes:
    """A plain text of exactly `size` bytes, different each time (no de-duplication)."""
    words = f"{uuid.uuid4().hex} " + "Refunds are paid within fourteen days. " * (size // 39 + 1)
    return words.encode()[:size]


async def _upload(
    client: httpx.AsyncClient, who: LoggedIn, path: str, name: str, data: bytes
) -> httpx.Response:
    form = {"title": "A title", "external_id": "ext-1"} if path == "/kb/documents" else {}
    return await client.post(path, files={"file": (name, data)}, data=form, headers=who.headers)


@pytest.mark.parametrize("path", ["/attachments", "/kb/documents"])
@pytest.mark.parametrize("name", NAMES.values(), ids=NAMES.keys())
async def test_a_file_of_exactly_the_limit_is_accepted_and_one_byte_more_is_413(
    small_limit_app: FastAPI, db: AsyncSession, path: str, name: str
) -> None:
    transport = httpx.ASGITransport(app=small_limit_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        who = await login(client, await make_user(db, await make_tenant(db), role="admin"))
        at_limit = await _upload(client, who, path, name, _text(LIMIT))
        over = await _upload(client, who, path, name, _text(LIMIT + 1))
    assert at_limit.status_code in (201, 202), at_limit.text
    assert over.status_code == 413, over.text
    assert over.json()["error"]["code"] == "payload_too_large"
    assert str(LIMIT) in over.json()["error"]["message"]


async def test_the_form_around_the_file_is_bounded(
    small_limit_app: FastAPI, db: AsyncSession
) -> None:
    transport = httpx.ASGITransport(app=small_limit_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        who = await login(client, await make_user(db, await make_tenant(db), role="admin"))
        padded = await client.post(
            "/kb/documents",
            files={"file": ("a.txt", _text(100))},
            data={"metadata": '{"pad": "' + "x" * (LIMIT + MULTIPART_ENVELOPE_BYTES) + '"}'},
            headers=who.headers,
        )
    assert padded.status_code == 413, padded.text
    assert padded.json()["error"]["code"] == "payload_too_large"

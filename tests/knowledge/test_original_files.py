"""The original of an upload, served as a sandboxed download: the knowledge base's to its
tenant (members only once searchable), an attachment to its owner; 404 for anyone else."""

from __future__ import annotations

import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import scope_to_tenant
from app.models import KbDocument
from tests.factories import LoggedIn, login, make_tenant, make_user
from tests.knowledge.files import make_pdf

pytestmark = pytest.mark.committed

SCRIPTED = b"<html><script>fetch('/auth/me')</script>Refunds within 45 days.</html>\n"
HANDBOOK = make_pdf("Staff handbook.", "Refunds are paid within 45 days.")


def _assert_sandboxed(response: httpx.Response, disposition: str, filename: str) -> None:
    assert response.status_code == 200, response.text
    assert response.headers["content-disposition"].startswith(f'{disposition}; filename="')
    assert filename in response.headers["content-disposition"]
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["content-security-policy"] == "sandbox; default-src 'none'"


async def _upload_kb(client: httpx.AsyncClient, admin: LoggedIn, name: str, data: bytes) -> str:
    response = await client.post(
        "/kb/documents", files={"file": (name, data)}, headers=admin.headers
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def test_a_document_file_is_its_bytes_sandboxed_for_its_tenant_only(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    member = await login(client, await make_user(db, tenant))
    page = await _upload_kb(client, admin, "notes.html.txt", SCRIPTED)
    pdf = await _upload_kb(client, admin, "handbook.pdf", HANDBOOK)

    await app.state.resources.jobs.drain()
    text = await client.get(f"/kb/documents/{page}/file", headers=member.headers)
    _assert_sandboxed(text, "attachment", "notes.html.txt")
    assert text.content == SCRIPTED

    # Being ingested again (not searchable): the admin may open it, a member may not.
    await scope_to_tenant(db, tenant.id)
    await db.execute(
        update(KbDocument).where(KbDocument.id == uuid.UUID(page)).values(status="processing")
    )
    await db.commit()
    busy = await client.get(f"/kb/documents/{page}/file", headers=admin.headers)
    _assert_sandboxed(busy, "attachment", "notes.html.txt")
    hidden = await client.get(f"/kb/documents/{page}/file", headers=member.headers)
    assert hidden.status_code == 404

    opened = await client.get(f"/kb/documents/{pdf}/file", headers=member.headers)
    _assert_sandboxed(opened, "inline", "handbook.pdf")  # a PDF opens at its page
    assert opened.headers["content-type"] == "application/pdf"
    assert opened.content == HANDBOOK

    other = await make_tenant(db)
    for stranger in (
        await login(client, await make_user(db, other, role="admin")),
        await login(client, await make_user(db, other)),
    ):
        response = await client.get(f"/kb/documents/{pdf}/file", headers=stranger.headers)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "document_not_found"


async def test_an_attachment_file_is_its_owners_alone(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    owner = await login(client, await make_user(db, tenant))
    uploaded = await client.post(
        "/attachments", files={"file": ("page.txt", SCRIPTED)}, headers=owner.headers
    )
    assert uploaded.status_code == 201, uploaded.text
    attachment = uploaded.json()["id"]

    mine = await client.get(f"/attachments/{attachment}/file", headers=owner.headers)
    _assert_sandboxed(mine, "attachment", "page.txt")
    assert mine.content == SCRIPTED
    # Typed by its content (ADR 0074), whatever its name says: HTML, kept harmless by the
    # headers checked above (a download, in a sandbox, never sniffed).
    assert mine.headers["content-type"].startswith("text/html")

    for stranger_user in (
        await make_user(db, tenant, role="admin"),  # an admin of the same tenant, too
        await make_user(db, await make_tenant(db)),
    ):
        stranger = await login(client, stranger_user)
        response = await client.get(f"/attachments/{attachment}/file", headers=stranger.headers)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "attachment_not_found"

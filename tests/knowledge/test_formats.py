"""Issue 29: every format read by content, its structure kept, and every passage knowing
where it is, from the upload to `/kb/search`, `/chat` (and its prompt), the stream, an
attachment, the stored manifest and the privacy export. The model is the only fake."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import BaseMessage
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.location import describe
from tests.chat_helpers import stream_chat, use_model
from tests.factories import LoggedIn, login, make_session, make_tenant, make_user
from tests.fakes import ScriptedChatModel, text_of
from tests.knowledge.format_files import SAMPLES, Sample

pytestmark = pytest.mark.committed


def _cite_first(messages: list[BaseMessage]) -> str:
    return "It is in the first source [1]."


async def _upload(
    app: FastAPI, client: httpx.AsyncClient, who: LoggedIn, sample: Sample, name: str
) -> dict[str, Any]:
    response = await client.post(
        "/kb/documents", files={"file": (name, sample.data)}, headers=who.headers
    )
    assert response.status_code == 202, response.text
    await app.state.resources.jobs.drain()
    document = await client.get(f"/kb/documents/{response.json()['id']}", headers=who.headers)
    return document.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", list(SAMPLES))
async def test_each_format_is_read_by_content_and_cited_with_its_location(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, kind: str
) -> None:
    sample: Sample = SAMPLES[kind]()
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    # A name that says nothing: the type comes from the content.
    document = await _upload(app, client, admin, sample, "upload.bin")
    assert document["content_type"] == sample.content_type
    assert (document["status"], document["error"]) == ("ready", None)

    found = await client.post(
        "/kb/search", json={"query": sample.query, "k": 3}, headers=admin.headers
    )
    top = found.json()["items"][0]
    assert sample.fact in top["snippet"]
    assert top["location"] == sample.location

    model = ScriptedChatModel(reply=_cite_first)
    use_model(app, model)
    member = await make_user(db, tenant)
    chat = await make_session(db, member)
    asker = await login(client, member)
    answered = await client.post(
        "/chat",
        json={"session_id": str(chat.id), "message": f"What about the {sample.query}?"},
        headers=asker.headers,
    )
    assert answered.status_code == 200, answered.text
    body = answered.json()
    first = body["sources"][0]
    assert sample.fact in first["snippet"]
    assert (first["cited"], first["location"]) == (True, sample.location)
    assert body["context_metadata"]["sources"][0]["location"] == sample.location
    # The model read where the passage is, and was asked to cite with it.
    prompt = text_of(model.calls[-1])
    assert f"({describe(sample.location)})" in prompt
    assert "name that place with the citation" in prompt

    # The stored turn (history) shows the same location.
    turns = await client.get(f"/sessions/{chat.id}/turns", headers=asker.headers)
    assert turns.status_code == 200, turns.text
    assert sample.location in _locations(turns.json())


def _locations(page: Any) -> list[Any]:
    return [
        source.get("location")
        for turn in page["items"]
        for source in turn["context_metadata"].get("sources", [])
    ]


async def test_the_stream_and_an_attachment_carry_the_location(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    sample = SAMPLES["docx"]()
    tenant = await make_tenant(db)
    user = await make_user(db, tenant)
    chat = await make_session(db, user)
    owner = await login(client, user)
    attached = await client.post(
        "/attachments", files={"file": ("terms", sample.data)}, headers=owner.headers
    )
    assert attached.status_code == 201, attached.text
    await app.state.resources.jobs.drain()
    attachment = await client.get(f"/attachments/{attached.json()['id']}", headers=owner.headers)
    assert attachment.json()["status"] == "ready", attachment.json()
    use_model(app, ScriptedChatModel(reply=_cite_first))
    response, events, _ = await stream_chat(
        client,
        owner.headers,
        {
            "session_id": str(chat.id),
            "message": "How long is the brindlewick refund in the attached terms?",
            "attachment_ids": [attached.json()["id"]],
        },
    )
    assert response.status_code == 200
    (sources,) = [e.data["sources"] for e in events if e.name == "sources"]
    fact = [s for s in sources if "brindlewick" in s["snippet"]]
    assert fact and fact[0]["kind"] == "attachment"
    assert fact[0]["location"] == sample.location
    # The privacy export carries the turn's manifest, its sources' locations with it.
    export = (await client.get("/me/export", headers=owner.headers)).json()
    (turn,) = export["turns"]
    exported = turn["context_metadata"]["sources"]
    assert sample.location in [source.get("location") for source in exported]


async def test_unreadable_types_are_refused_naming_what_is_accepted(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    admin = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("photo.jpg", b"\xff\xd8\xff" * 100)
    for name, data in (
        ("report.docx", archive.getvalue()),  # a zip, named as a document: still refused
        ("old.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(512)),
        ("photo.txt", bytes(range(256)) * 4),
    ):
        refused = await client.post(
            "/kb/documents", files={"file": (name, data)}, headers=admin.headers
        )
        assert refused.status_code == 415, (name, refused.text)
        error = refused.json()["error"]
        assert error["code"] == "unsupported_file_type"
        assert "Word (.docx)" in error["message"] and "EPUB" in error["message"], error

"""Issue 29 item 7: hostile files stay harmless. A zip bomb in any zip container, XML
entities (billion laughs) and external entities, a spreadsheet of a million empty cells,
deeply nested HTML and a PDF whose page tree lies each end `failed` with a reason, found
while reading (a PDF's /Count above its pages reads the real pages); a macro-enabled
document is read for its text only. Through the API, the hostile upload fails while a
chat answers."""

from __future__ import annotations

import asyncio
import io
import zipfile

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.ingestion.formats.types import DOCX, EPUB, HTML, ODT, PDF, XLSX
from app.ingestion.prepare import PrepareError, PrepareOptions, prepare
from tests.chat_helpers import add_kb_document, ask
from tests.factories import login, make_session, make_tenant, make_user
from tests.knowledge.format_files import SAMPLES
from tests.knowledge.hostile import (
    DEEP_HTML,
    LYING_PDFS,
    external_entity_epub,
    laughing_odt,
    macro_docx,
    million_empty_cells,
    replace_member,
    zip_bomb,
)


def _options(content_type: str) -> PrepareOptions:
    return PrepareOptions(
        content_type=content_type,
        anonymise=False,
        chunk_tokens=400,
        chunk_overlap=60,
        max_chars=10_000_000,
        max_pages=100,
    )


def _prepare(data: bytes, content_type: str) -> list[str]:
    return [chunk.text for chunk in prepare(data, _options(content_type)).chunks]


@pytest.mark.parametrize(
    ("kind", "content_type"),
    [
        ("docx", DOCX),
        ("xlsx", XLSX),
        ("pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
        ("epub", EPUB),
        ("odt", ODT),
    ],
)
def test_a_zip_bomb_is_refused_before_it_is_inflated(kind: str, content_type: str) -> None:
    bomb = zip_bomb(kind)
    with pytest.raises(PrepareError, match="zip bomb"):
        _prepare(bomb, content_type)


def test_xml_entities_and_external_entities_are_refused() -> None:
    with pytest.raises(PrepareError, match="entities or a DTD"):
        _prepare(laughing_odt(), ODT)
    with pytest.raises(PrepareError, match="entities or a DTD"):
        _prepare(external_entity_epub(), EPUB)


def test_a_word_document_never_resolves_an_external_entity() -> None:
    docx = SAMPLES["docx"]()
    source = zipfile.ZipFile(io.BytesIO(docx.data)).read("word/document.xml")
    head, body = source.split(b"?>", 1)
    hostile = (
        head
        + b'?><!DOCTYPE w [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        + body.replace(b"brindlewick", b"brindlewick &x;", 1)
    )
    text = "\n".join(_prepare(replace_member(docx.data, "word/document.xml", hostile), DOCX))
    assert "brindlewick" in text
    assert "root:" not in text


def test_a_macro_enabled_document_is_read_for_its_text_only() -> None:
    text = "\n".join(_prepare(macro_docx(), DOCX))
    assert "brindlewick" in text
    assert "AutoOpen" not in text


def test_a_million_empty_cells_stop_at_the_limit() -> None:
    with pytest.raises(PrepareError, match="more than 1000000 cells"):
        _prepare(million_empty_cells(), XLSX)


def test_deeply_nested_html_is_refused() -> None:
    with pytest.raises(PrepareError, match="deeper than"):
        _prepare(DEEP_HTML, HTML)


@pytest.mark.parametrize("lie", sorted(LYING_PDFS))
def test_a_pdf_whose_page_tree_lies_fails_or_reads_its_real_pages(lie: str) -> None:
    """A cycle, a node that is its own kid, a tree deeper than any document, a tree whose
    shared nodes name a billion leaves, a /Count with no pages behind it: each fails with
    its reason while the tree is walked (pypdf walks it with a stack, bounded in depth and
    entries). A /Count far above the real pages and kids that are not pages are read for
    the one real page, nothing more."""
    data, reason = LYING_PDFS[lie]
    if reason is None:
        prepared = prepare(data, _options(PDF))
        assert prepared.pages == 1
        assert [chunk.text for chunk in prepared.chunks] == ["quillet page"]
        assert [chunk.location for chunk in prepared.chunks] == [{"page": 1}]
    else:
        with pytest.raises(PrepareError, match=reason):
            prepare(data, _options(PDF))


@pytest.mark.committed
async def test_hostile_uploads_fail_with_their_reason_while_a_chat_answers(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    await add_kb_document(db, tenant, "Returns", ["Returns are accepted within 30 days."])
    member = await make_user(db, tenant)
    chat = await make_session(db, member)
    asker = await login(client, member)
    hostile = {
        "bomb.docx": (zip_bomb("docx"), "zip bomb"),
        "cells.xlsx": (million_empty_cells(), "cells"),
        "deep.html": (DEEP_HTML, "deeper than"),
        "cycle.pdf": (LYING_PDFS["cycle"][0], "cyclic page references"),
    }
    ids = {}
    for name, (data, _) in hostile.items():
        response = await client.post(
            "/kb/documents", files={"file": (name, data)}, headers=admin.headers
        )
        assert response.status_code == 202, response.text
        ids[name] = response.json()["id"]
    drained = asyncio.ensure_future(app.state.resources.jobs.drain())
    answered = await ask(client, asker, chat, "How long are returns accepted?")
    assert answered.status_code == 200 and "30 days" in answered.text
    await drained
    for name, (_, reason) in hostile.items():
        document = (await client.get(f"/kb/documents/{ids[name]}", headers=admin.headers)).json()
        assert document["status"] == "failed", (name, document)
        assert reason in document["error"], (name, document["error"])

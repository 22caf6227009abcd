"""Issue 29 item 7: hostile files stay harmless. A zip bomb in any zip container, XML
entities (billion laughs) and external entities, a spreadsheet of a million empty cells
and deeply nested HTML each end `failed` with a reason, found while reading; a
macro-enabled document is read for its text only. Through the API, the hostile upload
fails while a chat answers."""

from __future__ import annotations

import asyncio
import io
import zipfile

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.ingestion.formats.types import DOCX, EPUB, HTML, ODT, XLSX
from app.ingestion.prepare import PrepareError, PrepareOptions, prepare
from tests.chat_helpers import add_kb_document, ask
from tests.factories import login, make_session, make_tenant, make_user
from tests.knowledge.format_files import SAMPLES


def _prepare(data: bytes, content_type: str) -> list[str]:
    options = PrepareOptions(
        content_type=content_type,
        anonymise=False,
        chunk_tokens=400,
        chunk_overlap=60,
        max_chars=10_000_000,
        max_pages=100,
    )
    return [chunk.text for chunk in prepare(data, options).chunks]


def _replace(data: bytes, name: str, body: bytes, extra: dict[str, bytes] | None = None) -> bytes:
    """A copy of a zip container with one member's body replaced (and members added)."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as copy:
        for member in source.infolist():
            copy.writestr(member.filename, body if member.filename == name else source.read(member))
        for added, content in (extra or {}).items():
            copy.writestr(added, content)
    return out.getvalue()


BOMB = b"<?xml version='1.0'?><x>" + b" " * (8 * 1024 * 1024) + b"</x>"
"""8 MB that deflates to a few kilobytes: a ratio no document part has."""


@pytest.mark.parametrize(
    ("kind", "content_type", "member"),
    [
        ("docx", DOCX, "word/document.xml"),
        ("xlsx", XLSX, "xl/worksheets/sheet2.xml"),
        (
            "pptx",
            "application/vnd.openxmlformats-officedocument.presentationml.presentation",
            "ppt/slides/slide1.xml",
        ),
        ("epub", EPUB, "OEBPS/two.xhtml"),
        ("odt", ODT, "content.xml"),
    ],
)
def test_a_zip_bomb_is_refused_before_it_is_inflated(
    kind: str, content_type: str, member: str
) -> None:
    bomb = _replace(SAMPLES[kind]().data, member, BOMB)
    with pytest.raises(PrepareError, match="zip bomb"):
        _prepare(bomb, content_type)


LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + b"".join(
        b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
        for i in range(1, 10)
    )
    + b"]>"
)


def test_xml_entities_and_external_entities_are_refused() -> None:
    odt = SAMPLES["odt"]()
    laughs = LAUGHS + (
        b'<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0">'
        b"<office:body><office:text>&lol9;</office:text></office:body></office:document-content>"
    )
    with pytest.raises(PrepareError, match="entities or a DTD"):
        _prepare(_replace(odt.data, "content.xml", laughs), ODT)
    epub = SAMPLES["epub"]()
    external = (
        b'<?xml version="1.0"?><!DOCTYPE c [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b'<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
        b'<rootfile full-path="&x;"/></rootfiles></container>'
    )
    with pytest.raises(PrepareError, match="entities or a DTD"):
        _prepare(_replace(epub.data, "META-INF/container.xml", external), EPUB)


def test_a_word_document_never_resolves_an_external_entity() -> None:
    docx = SAMPLES["docx"]()
    source = zipfile.ZipFile(io.BytesIO(docx.data)).read("word/document.xml")
    head, body = source.split(b"?>", 1)
    hostile = (
        head
        + b'?><!DOCTYPE w [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        + body.replace(b"brindlewick", b"brindlewick &x;", 1)
    )
    text = "\n".join(_prepare(_replace(docx.data, "word/document.xml", hostile), DOCX))
    assert "brindlewick" in text
    assert "root:" not in text


def test_a_macro_enabled_document_is_read_for_its_text_only() -> None:
    docx = SAMPLES["docx"]()
    types = zipfile.ZipFile(io.BytesIO(docx.data)).read("[Content_Types].xml")
    macro = types.replace(
        b"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml",
        b"application/vnd.ms-word.document.macroEnabled.main+xml",
    )
    docm = _replace(
        docx.data,
        "[Content_Types].xml",
        macro,
        {"word/vbaProject.bin": b'\xd0\xcf\x11\xe0 Sub AutoOpen() Shell("calc") End Sub'},
    )
    text = "\n".join(_prepare(docm, DOCX))
    assert "brindlewick" in text
    assert "AutoOpen" not in text


def million_empty_cells() -> bytes:
    """A workbook whose sheet claims every column (A1:XFD1048576): each row it has is read
    as 16,384 cells, nearly all empty."""
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["a", "b"])
    out = io.BytesIO()
    book.save(out)
    rows = "".join(
        f'<row r="{i}"><c r="A{i}" t="inlineStr"><is><t>x</t></is></c></row>' for i in range(1, 101)
    )
    sheet_xml = (
        '<?xml version="1.0" encoding="UTF-8"?><worksheet '
        'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
        f'<dimension ref="A1:XFD1048576"/><sheetData>{rows}</sheetData></worksheet>'
    )
    return _replace(out.getvalue(), "xl/worksheets/sheet1.xml", sheet_xml.encode())


def test_a_million_empty_cells_stop_at_the_limit() -> None:
    with pytest.raises(PrepareError, match="more than 1000000 cells"):
        _prepare(million_empty_cells(), XLSX)


DEEP_HTML = b"<!DOCTYPE html><html><body>" + b"<div>" * 50_000 + b"deep" + b"</div>" * 50_000


def test_deeply_nested_html_is_refused() -> None:
    with pytest.raises(PrepareError, match="deeper than"):
        _prepare(DEEP_HTML, HTML)


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
        "bomb.docx": (_replace(SAMPLES["docx"]().data, "word/document.xml", BOMB), "zip bomb"),
        "cells.xlsx": (million_empty_cells(), "cells"),
        "deep.html": (DEEP_HTML, "deeper than"),
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

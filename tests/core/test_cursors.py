"""Crafted pagination cursors are a 400 `invalid_cursor` on every list endpoint, never a 500."""

from __future__ import annotations

import base64
import json
import uuid

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from tests.factories import login, make_session, make_tenant, make_turn, make_user


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _pair(created_at: object, object_id: object) -> str:
    return _b64(json.dumps([created_at, object_id]).encode())


SOME_ID = str(uuid.uuid4())
CRAFTED = [
    "!!!!",  # not base64
    "a",  # impossible base64 length
    "%C3%A9",  # not ASCII once decoded from the query string
    _b64(b"\xff\xfe\xfd garbage"),  # base64 of bytes that are not UTF-8
    _b64(b"{not json"),
    _b64(b"5"),
    _b64(b"null"),
    _b64(b'{"a": 1, "b": 2}'),
    _b64(b"[1, 2, 3]"),
    _pair(1, 2),
    _pair("2026-01-01T00:00:00+00:00", 5),  # an id that is a number
    _pair("2026-01-01T00:00:00+00:00", ["x"]),
    _pair(["2026"], SOME_ID),
    _pair("2026-01-01T00:00:00+00:00", "not-a-uuid"),
    _pair("2026-01-01T00:00:00", SOME_ID),  # no time zone
    _pair("9999-12-31T23:59:59-05:00", SOME_ID),  # past year 9999 in UTC
    _pair("0001-01-01T00:00:00+05:00", SOME_ID),  # before year 1 in UTC
    _pair("2026-13-45T99:99:99+00:00", SOME_ID),
    _b64(b"[1e999, 1e999]"),
    _b64(b"[" * 150),
]
# Of the cursors' own forms (app/core/pagination.py), but not of their patterns.
CRAFTED += [
    "1." + "0" * 31,  # an id one digit short
    "1." + "0" * 31 + "G",
    "12345678901234567." + "0" * 32,  # 17 digits
    "-1." + "0" * 32,
    "1." + "0" * 32 + "\n",
    "1",
]
# The audit log's cursor is an entry id (so "5" is a valid one).
CRAFTED_LOG = [
    *(cursor for cursor in CRAFTED if cursor != "1"),
    "99999999999999999999999999",  # beyond bigint
    "1" * 19,
    str(2**63),
    "-5",
    "0",
    "05",
    "1.5",
    _b64(b"5"),  # the earlier form
]


async def test_crafted_cursors_are_400_on_every_list_endpoint(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    admin = await make_user(db, await make_tenant(db), role="admin")
    chat = await make_session(db, admin)
    await make_turn(db, chat)
    who = await login(client, admin)
    endpoints = {
        "/sessions": CRAFTED,
        f"/sessions/{chat.id}/turns": CRAFTED,
        "/kb/documents": CRAFTED,
        "/admin/audit/turns": CRAFTED,
        "/admin/audit/log": CRAFTED_LOG,
        "/admin/users": ["!!!!", "a", "AAAAA", "AA==", "A.B", "%C3%A9"],
    }
    for path, cursors in endpoints.items():
        for cursor in cursors:
            response = await client.get(
                f"{path}?cursor={cursor}" if "%" in cursor else path,
                params=None if "%" in cursor else {"cursor": cursor},
                headers=who.headers,
            )
            assert response.status_code == 400, (path, cursor, response.text)
            error = response.json()["error"]
            assert error["code"] == "invalid_cursor", (path, cursor)
            assert error["request_id"]


@pytest.mark.parametrize(
    "path", ["/sessions", "/kb/documents", "/admin/audit/turns", "/admin/audit/log"]
)
async def test_a_real_cursor_still_pages(
    client: httpx.AsyncClient, db: AsyncSession, path: str
) -> None:
    admin = await make_user(db, await make_tenant(db), role="admin")
    for _ in range(3):
        await make_session(db, admin)
    who = await login(client, admin)
    await client.get("/admin/audit/turns", headers=who.headers)  # leaves audit entries
    await client.get("/admin/audit/turns", headers=who.headers)
    first = await client.get(path, params={"limit": 1}, headers=who.headers)
    assert first.status_code == 200, first.text
    cursor = first.json()["next_cursor"]
    if cursor is not None:
        second = await client.get(path, params={"limit": 1, "cursor": cursor}, headers=who.headers)
        assert second.status_code == 200, second.text


async def test_every_cursor_of_the_documented_form_is_a_position(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """The document's cursor patterns are exact: a string of one, issued or not, pages."""
    admin = await make_user(db, await make_tenant(db), role="admin")
    chat = await make_session(db, admin)
    who = await login(client, admin)
    keyset = ["0." + "0" * 32, "9" * 16 + "." + "f" * 32, "1764200000000000." + uuid.uuid4().hex]
    endpoints = {
        "/sessions": keyset,
        f"/sessions/{chat.id}/turns": keyset,
        "/kb/documents": keyset,
        "/admin/audit/turns": keyset,
        "/admin/audit/log": ["1", "9" * 18],
        "/admin/users": ["", "AA", "_-_", "____", _b64(b"\xff\x00@"), _b64(b"b@example.com")],
    }
    for path, cursors in endpoints.items():
        for cursor in cursors:
            response = await client.get(path, params={"cursor": cursor}, headers=who.headers)
            assert response.status_code == 200, (path, cursor, response.text)

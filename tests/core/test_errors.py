"""Every failure is JSON of one shape, with the right status, and never a stack trace."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from tests.factories import login, make_tenant, make_user


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert error["request_id"] == response.headers["x-request-id"]


@pytest.mark.parametrize(
    "body",
    [b'{"title": ', b'{"title": "\xff"}', b"[" * 100_000],
    ids=["cut short", "invalid UTF-8", "nested past the parser's depth"],
)
async def test_malformed_json_is_400(
    client: httpx.AsyncClient, db: AsyncSession, body: bytes
) -> None:
    owner = await login(client, await make_user(db, await make_tenant(db)))
    response = await client.post(
        "/sessions", content=body, headers={**owner.headers, "content-type": "application/json"}
    )
    assert_error(response, 400, "malformed_json")


async def test_wrong_types_are_422_with_details_that_do_not_echo_input(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    owner = await login(client, await make_user(db, await make_tenant(db)))
    response = await client.post(
        "/sessions", json={"title": ["secret-looking input"]}, headers=owner.headers
    )
    assert_error(response, 422, "validation_error")
    details = response.json()["error"]["details"]
    assert details[0]["loc"] == ["body", "title"]
    assert "secret-looking input" not in response.text


async def test_oversized_body_is_413_by_length_and_by_stream(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    too_big = b"x" * (settings.max_body_bytes + 1)
    declared = await client.post(
        "/auth/token", content=too_big, headers={"content-type": "application/json"}
    )
    assert_error(declared, 413, "payload_too_large")

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted while it streams in
        for _ in range(settings.max_body_bytes // 65536 + 2):
            yield b"y" * 65536

    streamed = await client.post(
        "/auth/token", content=chunks(), headers={"content-type": "application/json"}
    )
    assert_error(streamed, 413, "payload_too_large")


async def test_unknown_route_and_wrong_method(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/no/such/thing"), 404, "not_found")
    assert_error(await client.delete("/healthz"), 405, "method_not_allowed")


async def test_invalid_object_id_is_422(client: httpx.AsyncClient, db: AsyncSession) -> None:
    owner = await login(client, await make_user(db, await make_tenant(db)))
    assert_error(
        await client.get("/sessions/not-a-uuid", headers=owner.headers), 422, "validation_error"
    )


async def test_an_unexpected_exception_is_a_bare_500(app: FastAPI) -> None:
    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("database password is hunter2")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get("/boom", headers={"X-Request-ID": "trace-me-123"})
    assert_error(response, 500, "internal_error")
    assert response.headers["x-request-id"] == "trace-me-123"
    assert "hunter2" not in response.text
    assert "Traceback" not in response.text


async def test_request_id_is_generated_or_echoed(client: httpx.AsyncClient) -> None:
    generated = await client.get("/healthz")
    assert len(generated.headers["x-request-id"]) == 32
    echoed = await client.get("/healthz", headers={"X-Request-ID": "abc-123"})
    assert echoed.headers["x-request-id"] == "abc-123"
    unsafe = await client.get("/healthz", headers={"X-Request-ID": "bad id\twith spaces"})
    assert unsafe.headers["x-request-id"] != "bad id\twith spaces"


async def test_a_body_of_an_unaccepted_type_is_415(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    owner = await login(client, await make_user(db, await make_tenant(db)))
    response = await client.post(
        "/sessions", content=b"title=x", headers={**owner.headers, "content-type": "text/plain"}
    )
    assert_error(response, 415, "unsupported_media_type")


async def test_a_nul_character_is_a_clear_422_not_a_500(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    owner = await login(client, await make_user(db, await make_tenant(db)))
    response = await client.post("/sessions", json={"title": "a\u0000b"}, headers=owner.headers)
    # Refused by the schema's pattern (^[^\x00]*$) before the database sees it.
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] != "internal_error"
    # Where only the database checks it (a document's metadata, JsonWithoutNul), 422 too.
    admin = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    stored = await client.post(
        "/kb/documents",
        json={"title": "t", "text": "x", "metadata": {"k": "a\u0000b"}},
        headers=admin.headers,
    )
    assert_error(stored, 422, "invalid_data")
    login_attempt = await client.post(
        "/auth/token", json={"email": "a\u0000@b.co", "password": "x"}
    )
    assert login_attempt.status_code in (401, 422)
    assert login_attempt.json()["error"]["code"] != "internal_error"


async def test_a_wrong_method_is_405_with_every_method_of_the_path_in_allow(
    client: httpx.AsyncClient,
) -> None:
    """Each method of a path is a route of its own: the router's 405 used to name only the
    first one it matched (`PUT /me` said `Allow: GET`, hiding `DELETE`)."""
    cases = {
        "/me": ("PUT", "GET, DELETE"),
        "/sessions": ("PATCH", "GET, POST"),
        "/sessions/0b1e5b1e-5b1e-4b1e-8b1e-5b1e5b1e5b1e": ("PUT", "GET, PATCH, DELETE"),
        "/admin/retention": ("POST", "GET, PUT"),
        "/healthz": ("DELETE", "GET"),
    }
    for path, (method, allowed) in cases.items():
        response = await client.request(method, path)
        assert_error(response, 405, "method_not_allowed")
        assert response.headers["allow"] == allowed, path


async def test_malformed_json_to_kb_documents_is_400_like_everywhere_else(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    admin = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    headers = {**admin.headers, "content-type": "application/json"}
    malformed = await client.post("/kb/documents", content=b'{"title": ', headers=headers)
    assert_error(malformed, 400, "malformed_json")
    invalid = await client.post("/kb/documents", json={"title": ""}, headers=admin.headers)
    assert_error(invalid, 422, "validation_error")
    assert {tuple(d["loc"]) for d in invalid.json()["error"]["details"]} >= {
        ("body", "title"),
        ("body", "text"),
    }


async def test_a_json_number_field_takes_no_boolean_or_string(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """The document says integer or number: `true` and `"5"` are not (lax pydantic took them
    as 1 and 5), while `5.0` is an integer in JSON Schema and is taken."""
    admin = await login(client, await make_user(db, await make_tenant(db), role="admin"))
    for value in (True, "5"):
        search = await client.post(
            "/kb/search", json={"query": "x", "k": value}, headers=admin.headers
        )
        assert_error(search, 422, "validation_error")
        retention = await client.put(
            "/admin/retention", json={"max_turn_age_days": value}, headers=admin.headers
        )
        assert_error(retention, 422, "validation_error")
    guardrails = await client.put("/admin/guardrails", json={"smalltalk": 0}, headers=admin.headers)
    assert_error(guardrails, 422, "validation_error")
    taken = await client.post("/kb/search", json={"query": "x", "k": 5.0}, headers=admin.headers)
    assert taken.status_code == 200, taken.text
    unix_time = await client.get("/admin/audit/turns?until=0.5", headers=admin.headers)
    assert_error(unix_time, 422, "validation_error")


async def test_the_openapi_document_describes_every_error_with_its_body(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    me = document["paths"]["/me"]
    # 429: a credential with too many requests in progress (ADR 0093).
    assert set(me["get"]["responses"]) == {"200", "401", "429", "503"}
    chat = document["paths"]["/chat"]["post"]["responses"]
    assert {"400", "401", "404", "409", "413", "415", "422", "429", "503"} <= set(chat)
    assert chat["422"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorResponse"
    }
    assert "HTTPValidationError" not in document["components"]["schemas"]

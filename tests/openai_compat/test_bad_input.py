"""Bad requests to `/v1`: each a clear error in OpenAI's shape, each storing nothing; and the
ways in (an API key as bearer or X-API-Key, a user's access token)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from app.conversation.turn.schemas import MAX_MESSAGE_CHARS
from tests.factories import DEFAULT_PASSWORD
from tests.openai_compat.world import World

USER = [{"role": "user", "content": "How long do refunds take?"}]


async def post(world: World, body: Any, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        content = body if isinstance(body, bytes) else None
        return await client.post(
            "/v1/chat/completions",
            content=content,
            json=None if content is not None else body,
            headers={
                "Authorization": f"Bearer {world.a.admin_key}",
                "Content-Type": "application/json",
                **headers,
            },
        )


def openai_error(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert error["message"]
    return error


@pytest.mark.parametrize(
    ("body", "status", "code", "param"),
    [
        (b'{"model": "threadline", "messages": [', 400, "malformed_json", None),
        ({"model": "threadline"}, 400, "validation_error", "messages"),
        ({"model": "threadline", "messages": "hi"}, 400, "validation_error", "messages"),
        (
            {"model": "threadline", "messages": [{"role": "robot", "content": "hi"}]},
            400,
            "validation_error",
            "messages.0.role",
        ),
        (
            {"model": "threadline", "messages": [{"role": "assistant", "content": "hi"}]},
            400,
            "validation_error",
            None,
        ),
        ({"model": "threadline", "messages": USER, "n": 3}, 400, "validation_error", "n"),
        (
            {"model": "threadline", "messages": USER, "stream": "yes"},
            400,
            "validation_error",
            "stream",
        ),
        ({"model": "gpt-4o", "messages": USER}, 404, "model_not_found", None),
        (
            {
                "model": "threadline",
                "messages": [{"role": "user", "content": "x" * (MAX_MESSAGE_CHARS + 1)}],
            },
            400,
            "validation_error",
            "messages.0.content",
        ),
        (
            {"model": "threadline", "messages": USER, "metadata": {"session_id": "nope"}},
            400,
            "invalid_session_id",
            None,
        ),
    ],
)
async def test_bad_requests_are_clear_errors_that_store_nothing(
    world: World, body: Any, status: int, code: str, param: str | None
) -> None:
    turns = await world.turns(world.a.tenant_id)
    sessions = await world.sessions(world.a.tenant_id)

    response = await post(world, body)

    assert response.status_code == status, response.text
    error = openai_error(response)
    assert (error["code"], error["param"]) == (code, param)
    assert error["type"] == ("invalid_request_error")
    assert await world.turns(world.a.tenant_id) == turns
    assert await world.sessions(world.a.tenant_id) == sessions


async def test_a_body_over_the_limit_is_413_in_openais_shape(world: World) -> None:
    turns = await world.turns(world.a.tenant_id)
    huge = [{"role": "user", "content": "y" * 30_000}] * 40  # 1.2 MB > THREADLINE_MAX_BODY_BYTES
    response = await post(world, {"model": "threadline", "messages": huge})
    assert response.status_code == 413
    assert openai_error(response)["code"] == "payload_too_large"
    assert await world.turns(world.a.tenant_id) == turns


async def test_the_sdk_raises_the_matching_exceptions(world: World) -> None:
    good = openai.AsyncOpenAI(base_url=f"{world.url}/v1", api_key=world.a.admin_key)
    with pytest.raises(openai.NotFoundError):
        await good.chat.completions.create(model="gpt-4o", messages=USER)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError):
        await good.chat.completions.create(model="threadline", messages=[])
    wrong = openai.AsyncOpenAI(base_url=f"{world.url}/v1", api_key="tl_not-a-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        await wrong.models.list()
    assert caught.value.code == "invalid_api_key"


async def test_errors_outside_v1_keep_the_apis_own_shape(world: World) -> None:
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        response = await client.get(
            "/sessions/not-a-uuid", headers={"X-API-Key": world.a.admin_key}
        )
    assert response.status_code == 422
    assert set(response.json()["error"]) >= {"code", "message"}
    assert "type" not in response.json()["error"]


async def test_an_api_key_as_bearer_an_x_api_key_or_an_access_token_all_work(
    world: World,
) -> None:
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        login = await client.post(
            "/auth/token", json={"email": world.a.email, "password": DEFAULT_PASSWORD}
        )
        token = login.json()["access_token"]
        for headers in (
            {"Authorization": f"Bearer {world.a.member_key}"},
            {"X-API-Key": world.a.member_key},
            {"Authorization": f"Bearer {token}"},
        ):
            models = await client.get("/v1/models", headers=headers)
            assert models.status_code == 200, (headers, models.text)
            # The bearer API key is accepted by the native API too.
            sessions = await client.get("/sessions", headers=headers)
            assert sessions.status_code == 200, (headers, sessions.text)


async def test_an_unexpected_method_or_path_under_v1_is_in_openais_shape(world: World) -> None:
    headers = {"Authorization": f"Bearer {world.a.admin_key}"}
    async with httpx.AsyncClient(base_url=world.url, timeout=30) as client:
        wrong_method = await client.get("/v1/chat/completions", headers=headers)
        unknown = await client.post("/v1/embeddings", json={}, headers=headers)
    assert wrong_method.status_code == 405
    assert wrong_method.headers["Allow"] == "POST"
    assert openai_error(wrong_method)["code"] == "method_not_allowed"
    assert unknown.status_code == 404
    assert openai_error(unknown)["code"] == "not_found"

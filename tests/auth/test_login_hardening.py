"""Login under attack: parallel guesses, forged client addresses, the cost of a login."""

from __future__ import annotations

import asyncio
import hashlib
import signal
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth import passwords
from app.config import Settings
from app.main import create_app
from tests.factories import DEFAULT_PASSWORD, make_tenant, make_user
from tests.private_redis import private_redis


@pytest.mark.committed  # parallel requests: each needs its own connection
async def test_parallel_wrong_passwords_admit_exactly_the_limit(
    client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    user = await make_user(db, await make_tenant(db))
    guesses = [
        client.post("/auth/token", json={"email": user.email, "password": f"guess-{i}"})
        for i in range(40)
    ]
    statuses = [r.status_code for r in await asyncio.gather(*guesses)]
    assert statuses.count(401) == settings.login_max_failures
    assert statuses.count(429) == 40 - settings.login_max_failures

    right = await client.post(
        "/auth/token", json={"email": user.email, "password": DEFAULT_PASSWORD}
    )
    assert right.status_code == 429
    assert right.json()["error"]["code"] == "login_throttled"


async def test_a_successful_login_gives_its_slot_back(
    client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    user = await make_user(db, await make_tenant(db))
    for _ in range(settings.login_max_failures + 2):
        ok = await client.post(
            "/auth/token", json={"email": user.email, "password": DEFAULT_PASSWORD}
        )
        assert ok.status_code == 200


async def _client_keys(app: FastAPI) -> set[str]:
    redis = app.state.resources.redis
    pattern = redis.key("login-failures", "client", "*")
    return {
        (key.decode() if isinstance(key, bytes) else key).rsplit(":", 1)[1]
        async for key in redis.client.scan_iter(match=pattern)
    }


async def _failed_login_via(app: FastAPI, peer: str, forwarded_for: str) -> None:
    transport = httpx.ASGITransport(app=app, client=(peer, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://threadline.test") as c:
        response = await c.post(
            "/auth/token",
            json={"email": "nobody@example.com", "password": "wrong-password"},
            headers={"X-Forwarded-For": forwarded_for},
        )
    assert response.status_code == 401


async def test_x_forwarded_for_from_an_untrusted_peer_is_ignored(app: FastAPI) -> None:
    await _failed_login_via(app, "127.0.0.1", "203.0.113.7")
    assert await _client_keys(app) == {"127.0.0.1"}


async def test_x_forwarded_for_from_a_configured_proxy_is_honoured(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    proxied = settings.model_copy(update={"trusted_proxies": ["10.0.0.0/8", "127.0.0.1"]})
    application = create_app(proxied)
    async with application.router.lifespan_context(application):
        application.state.resources.use_sessionmaker(sessionmaker)
        # Through two trusted proxies: the client is the first untrusted hop from the right;
        # what it wrote itself further left (a forged address) is not believed.
        await _failed_login_via(application, "127.0.0.1", "198.51.100.1, 203.0.113.7, 10.1.2.3")
        # A peer that is no proxy of ours forwards nothing.
        await _failed_login_via(application, "192.0.2.50", "198.51.100.99")
        assert await _client_keys(application) == {"203.0.113.7", "192.0.2.50"}
        redis = application.state.resources.redis
        keys = [k async for k in redis.client.scan_iter(match=f"{proxied.redis_prefix}*")]
        if keys:
            await redis.client.delete(*keys)


def test_serve_leaves_x_forwarded_for_to_the_application(
    monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    """uvicorn's own proxy-header handling believes any loopback peer: it must be off."""
    import uvicorn
    from typer.testing import CliRunner

    from app import cli
    from app.cli import server

    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: seen.update(kw))
    monkeypatch.setattr(server, "get_settings", lambda: settings)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        result = CliRunner().invoke(cli.cli, ["serve"])
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert result.exit_code == 0, result.output
    assert seen["proxy_headers"] is False


def _count_verifications(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Count argon2 verifications (the test seam is the module's `_verify`)."""
    calls = 0
    real = passwords._verify

    def counting(password_hash: str, password: str) -> bool:
        nonlocal calls
        calls += 1
        return real(password_hash, password)

    monkeypatch.setattr(passwords, "_verify", counting)

    def taken() -> int:
        nonlocal calls
        count, calls = calls, 0
        return count

    return taken


async def test_a_login_verifies_one_hash_whatever_the_email(
    client: httpx.AsyncClient, db: AsyncSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = await make_user(db, await make_tenant(db), email="single@example.com")
    for _ in range(3):
        await make_user(db, await make_tenant(db), email="shared@example.com")
    verifications = _count_verifications(monkeypatch)
    answers = {}
    for email in ("ghost@example.com", one.email, "shared@example.com"):
        response = await client.post("/auth/token", json={"email": email, "password": "wrong!!!"})
        answers[email] = (response.status_code, response.json()["error"])
        assert verifications() == 1, email
    # The same answer, word for word, whether the e-mail is in no, one or several tenants.
    assert {(s, e["code"], e["message"]) for s, e in answers.values()} == {
        (401, "invalid_credentials", answers[one.email][1]["message"])
    }

    shared = await client.post(
        "/auth/token", json={"email": "shared@example.com", "password": DEFAULT_PASSWORD}
    )
    assert shared.json()["error"]["code"] == "tenant_required"
    assert verifications() == 1


async def test_the_throttle_fails_closed_when_redis_answers_but_the_count_fails(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession
) -> None:
    """A count that fails while Redis answers is a 503, never a password checked unthrottled
    (it used to be skipped: with the pool drained, 15 wrong passwords were 15 x 401)."""
    user = await make_user(db, await make_tenant(db))
    redis = app.state.resources.redis
    digest = hashlib.sha256(user.email.strip().lower().encode()).hexdigest()
    # A key of the wrong type: Redis answers every command, and the throttle's script fails.
    await redis.client.hset(redis.key("login-failures", "email", digest), "x", "1")
    try:
        for password in ("guess", DEFAULT_PASSWORD):
            response = await client.post(
                "/auth/token", json={"email": user.email, "password": password}
            )
            assert response.status_code == 503
            assert response.json()["error"]["code"] == "login_unavailable"
            assert response.headers["retry-after"] == "1"
    finally:
        await redis.client.delete(redis.key("login-failures", "email", digest))
    assert (
        await client.post("/auth/token", json={"email": user.email, "password": DEFAULT_PASSWORD})
    ).status_code == 200


@pytest.mark.committed
async def test_with_redis_down_the_process_counts_failed_logins_itself(
    settings: Settings, db: AsyncSession, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    with private_redis() as server:
        application = create_app(settings.model_copy(update={"redis_url": server.url}))
        async with application.router.lifespan_context(application):
            application.state.resources.use_sessionmaker(sessionmaker)
            transport = httpx.ASGITransport(app=application)
            async with httpx.AsyncClient(transport=transport, base_url="http://t.test") as client:
                user = await make_user(db, await make_tenant(db))
                server.stop()
                statuses = []
                for i in range(settings.login_max_failures + 2):
                    response = await client.post(
                        "/auth/token", json={"email": user.email, "password": f"guess-{i}"}
                    )
                    statuses.append(response.status_code)
                right = await client.post(
                    "/auth/token", json={"email": user.email, "password": DEFAULT_PASSWORD}
                )
    assert statuses == [401] * settings.login_max_failures + [429, 429]
    assert right.status_code == 429


async def _login_from(app: FastAPI, address: str, email: str, password: str) -> int:
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://threadline.test") as c:
        response = await c.post("/auth/token", json={"email": email, "password": password})
    return response.status_code


async def test_a_guesser_locks_out_their_own_address_not_the_accounts_owner(
    app: FastAPI, db: AsyncSession, settings: Settings
) -> None:
    """Counting failures per e-mail alone let anyone lock a user out for 15 minutes with 10
    guesses (issue 33); per e-mail and address, the owner elsewhere still signs in, and
    guesses from many addresses still meet the e-mail's total."""
    user = await make_user(db, await make_tenant(db))
    guesses = [
        await _login_from(app, "198.51.100.7", user.email, f"guess-{i}")
        for i in range(settings.login_max_failures + 1)
    ]
    assert guesses == [401] * settings.login_max_failures + [429]
    assert await _login_from(app, "198.51.100.7", user.email, DEFAULT_PASSWORD) == 429
    assert await _login_from(app, "203.0.113.20", user.email, DEFAULT_PASSWORD) == 200

    # A botnet: each address below its own limit, together at the e-mail's total.
    total = settings.login_max_failures * 10
    statuses = [
        await _login_from(app, f"192.0.2.{i // 5}", user.email, f"again-{i}") for i in range(total)
    ]
    # The e-mail's total already held the first address's 10 failures.
    assert statuses.count(401) == total - settings.login_max_failures
    assert statuses.count(429) == settings.login_max_failures
    assert await _login_from(app, "203.0.113.21", user.email, DEFAULT_PASSWORD) == 429

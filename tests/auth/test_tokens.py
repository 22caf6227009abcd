"""Login, refresh and the checks every token goes through."""

from __future__ import annotations

import base64
import time
import uuid

import httpx
import jwt
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core.db import scope_to_tenant
from tests.factories import DEFAULT_PASSWORD, login, make_tenant, make_user


async def test_login_with_json_returns_a_bearer_pair(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db), role="admin")
    response = await client.post(
        "/auth/token", json={"email": user.email, "password": DEFAULT_PASSWORD}
    )
    assert response.status_code == 200
    body = response.json()
    assert body["token_type"] == "bearer"
    assert body["expires_in"] == 900
    me = await client.get("/me", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert me.json() == {
        "id": str(user.id),
        "email": user.email,
        "tenant_id": str(user.tenant_id),
        "role": "admin",
    }


async def test_login_with_an_oauth2_form(client: httpx.AsyncClient, db: AsyncSession) -> None:
    user = await make_user(db, await make_tenant(db))
    response = await client.post(
        "/auth/token", data={"username": user.email.upper(), "password": DEFAULT_PASSWORD}
    )
    assert response.status_code == 200, response.text
    assert response.json()["access_token"]


async def test_wrong_password_and_unknown_email_are_the_same_401(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    wrong = await client.post("/auth/token", json={"email": user.email, "password": "nope-nope"})
    unknown = await client.post(
        "/auth/token", json={"email": "ghost@example.com", "password": "nope-nope"}
    )
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json()["error"]["code"] == unknown.json()["error"]["code"] == "invalid_credentials"
    assert wrong.headers["www-authenticate"] == "Bearer"


async def test_login_body_is_validated(client: httpx.AsyncClient) -> None:
    missing = await client.post("/auth/token", json={"email": "a@b.co"})
    assert missing.status_code == 422
    assert missing.json()["error"]["code"] == "validation_error"
    not_an_email = await client.post("/auth/token", json={"email": "nope", "password": "x"})
    assert not_an_email.status_code == 422
    broken = await client.post(
        "/auth/token", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert broken.status_code == 400
    assert broken.json()["error"]["code"] == "malformed_json"


async def test_same_email_in_two_tenants_needs_the_tenant(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    first, second = await make_tenant(db), await make_tenant(db)
    await make_user(db, first, email="shared@example.com")
    in_second = await make_user(db, second, email="shared@example.com")
    creds = {"email": "shared@example.com", "password": DEFAULT_PASSWORD}

    ambiguous = await client.post("/auth/token", json=creds)
    assert ambiguous.status_code == 401
    assert ambiguous.json()["error"]["code"] == "tenant_required"

    by_name = await client.post("/auth/token", json={**creds, "tenant": second.name})
    assert by_name.status_code == 200
    token = by_name.json()["access_token"]
    me = await client.get("/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["id"] == str(in_second.id)

    by_id = await client.post("/auth/token", json={**creds, "tenant": str(first.id)})
    assert by_id.status_code == 200


async def test_refresh_issues_a_new_pair_once(client: httpx.AsyncClient, db: AsyncSession) -> None:
    session = await login(client, await make_user(db, await make_tenant(db)))
    first = await client.post("/auth/refresh", json={"refresh_token": session.refresh_token})
    assert first.status_code == 200
    new_access = first.json()["access_token"]
    assert (
        await client.get("/me", headers={"Authorization": f"Bearer {new_access}"})
    ).status_code == 200
    second = await client.post(
        "/auth/refresh", json={"refresh_token": first.json()["refresh_token"]}
    )
    assert second.status_code == 200


async def test_a_replayed_refresh_token_signs_the_whole_login_out(
    client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    user = await make_user(db, await make_tenant(db))
    session = await login(client, user)
    stolen = session.refresh_token
    legit = await client.post("/auth/refresh", json={"refresh_token": stolen})
    assert legit.status_code == 200
    # Replayed after the reuse window (within it, it would be two tabs racing).
    await scope_to_tenant(db, user.tenant_id)
    await db.execute(
        text("UPDATE refresh_token_uses SET created_at = created_at - make_interval(secs => :s)"),
        {"s": settings.refresh_reuse_window_seconds + 1},
    )

    replay = await client.post("/auth/refresh", json={"refresh_token": stolen})
    assert replay.status_code == 401
    assert replay.json()["error"]["code"] == "token_reused"

    # Every token of that login is now dead: the refreshed pair and the original access token.
    descendant = legit.json()
    again = await client.post("/auth/refresh", json={"refresh_token": descendant["refresh_token"]})
    assert again.status_code == 401
    assert again.json()["error"]["code"] == "token_revoked"
    for access in (descendant["access_token"], session.headers["Authorization"][7:]):
        me = await client.get("/me", headers={"Authorization": f"Bearer {access}"})
        assert me.status_code == 401
        assert me.json()["error"]["code"] == "token_revoked"


async def test_logout_revokes_the_login_but_not_other_logins(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    user = await make_user(db, await make_tenant(db))
    laptop, phone = await login(client, user), await login(client, user)
    assert (await client.post("/auth/logout", headers=laptop.headers)).status_code == 204
    assert (await client.get("/me", headers=laptop.headers)).status_code == 401
    refreshed = await client.post("/auth/refresh", json={"refresh_token": laptop.refresh_token})
    assert refreshed.status_code == 401
    assert (await client.get("/me", headers=phone.headers)).status_code == 200


async def test_a_refresh_token_is_not_an_access_token_and_vice_versa(
    client: httpx.AsyncClient, db: AsyncSession
) -> None:
    session = await login(client, await make_user(db, await make_tenant(db)))
    as_access = await client.get(
        "/me", headers={"Authorization": f"Bearer {session.refresh_token}"}
    )
    assert as_access.status_code == 401
    assert as_access.json()["error"]["code"] == "invalid_token_type"

    access = session.headers["Authorization"].removeprefix("Bearer ")
    as_refresh = await client.post("/auth/refresh", json={"refresh_token": access})
    assert as_refresh.status_code == 401
    assert as_refresh.json()["error"]["code"] == "invalid_token_type"


def _forge(settings: Settings, secret: str | None = None, **claims: object) -> str:
    now = int(time.time())
    payload = {
        "iss": settings.jwt_issuer,
        "sub": str(uuid.uuid4()),
        "tid": str(uuid.uuid4()),
        "role": "admin",
        "typ": "access",
        "fam": str(uuid.uuid4()),
        "jti": uuid.uuid4().hex,
        "iat": now,
        "exp": now + 60,
        **claims,
    }
    return jwt.encode(payload, secret or settings.jwt_signing_key(), "HS256")


async def test_expired_malformed_and_forged_tokens_are_refused(
    client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    user = await make_user(db, await make_tenant(db))
    mine = {"sub": str(user.id), "tid": str(user.tenant_id)}
    cases = {
        "token_expired": _forge(settings, **mine, iat=1, exp=2),
        "invalid_token": "not.a.jwt",
    }
    for code, token in cases.items():
        response = await client.get("/me", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 401, code
        assert response.json()["error"]["code"] == code

    forged = _forge(settings, secret="another-secret-another-secret-xx", **mine)
    response = await client.get("/me", headers={"Authorization": f"Bearer {forged}"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_token"

    missing_claims = jwt.encode(
        {"sub": str(user.id), "exp": int(time.time()) + 60},
        settings.jwt_signing_key(),
        "HS256",
    )
    response = await client.get("/me", headers={"Authorization": f"Bearer {missing_claims}"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_token"

    wrong_issuer = _forge(settings, **mine, iss="someone-else")
    response = await client.get("/me", headers={"Authorization": f"Bearer {wrong_issuer}"})
    assert response.json()["error"]["code"] == "invalid_token"

    header = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
    body = _forge(settings, **mine).split(".")[1]
    unsigned = f"{header}.{body}."
    response = await client.get("/me", headers={"Authorization": f"Bearer {unsigned}"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_token"


async def test_a_valid_token_of_a_user_that_no_longer_exists_is_refused(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    token = _forge(settings)  # well signed, but nobody has this id
    response = await client.get("/me", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unknown_account"


async def test_no_credentials_is_401(client: httpx.AsyncClient) -> None:
    response = await client.get("/me")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


async def test_repeated_failed_logins_are_throttled(
    client: httpx.AsyncClient, db: AsyncSession, settings: Settings
) -> None:
    user = await make_user(db, await make_tenant(db))
    for _ in range(settings.login_max_failures):
        failed = await client.post("/auth/token", json={"email": user.email, "password": "guess"})
        assert failed.status_code == 401
    blocked = await client.post(
        "/auth/token", json={"email": user.email, "password": DEFAULT_PASSWORD}
    )
    assert blocked.status_code == 429
    assert blocked.json()["error"]["code"] == "login_throttled"
    assert int(blocked.headers["retry-after"]) > 0

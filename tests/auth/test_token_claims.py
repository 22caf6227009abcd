"""Whatever a signed token holds, it is a valid token or a 401: never a server error."""

from __future__ import annotations

import base64
import hmac
import json
import time
import uuid

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from tests.factories import make_tenant, make_user


def _token(
    settings: Settings,
    claims: dict[str, object],
    typ: str = "access",
    header: object = None,
) -> str:
    now = int(time.time())
    payload: dict[str, object] = {
        "iss": settings.jwt_issuer,
        "role": "member",
        "typ": typ,
        "fam": str(uuid.uuid4()),
        "jti": uuid.uuid4().hex,
        "iat": now,
        "exp": now + 60,
        **claims,
    }

    # Signed by hand: PyJWT's encoder refuses some of these, an attacker's would not.
    def part(value: object) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=")

    signed = part(header or {"alg": "HS256", "typ": "JWT"}) + b"." + part(payload)
    key = settings.jwt_signing_key().encode()
    signature = base64.urlsafe_b64encode(hmac.digest(key, signed, "sha256")).rstrip(b"=")
    return (signed + b"." + signature).decode()


# Fixed ids, not random ones: the test ids must be the same in every collecting process.
SOME_ID = "0f1e2d3c-4b5a-4968-8776-655443322110"
ODD_CLAIMS: list[dict[str, object]] = [
    {"fam": [SOME_ID]},
    {"fam": 12345},
    {"fam": {"id": SOME_ID}},
    {"fam": None},
    {"tid": [1, 2]},
    {"tid": 2**80},
    {"tid": True},
    {"sub": 42},
    {"sub": [SOME_ID]},
    {"role": ["admin"]},
    {"role": {"admin": True}},
    {"jti": 7},
    {"jti": ["x"]},
    {"typ": ["access"]},
    {"iss": ["threadline"]},
    {"exp": float("inf")},
    {"exp": 10**400},
    {"exp": "tomorrow"},
    {"iat": float("inf")},
    {"iat": [1]},
    {"nbf": float("inf")},
    {"nbf": 10**400},
]


@pytest.mark.parametrize("claims", ODD_CLAIMS, ids=lambda c: repr(c)[:40])
async def test_odd_claims_are_a_401_json_error(
    client: httpx.AsyncClient, db: AsyncSession, settings: Settings, claims: dict[str, object]
) -> None:
    user = await make_user(db, await make_tenant(db))
    base = {"sub": str(user.id), "tid": str(user.tenant_id)}
    access = _token(settings, {**base, **claims})
    me = await client.get("/me", headers={"Authorization": f"Bearer {access}"})
    assert me.status_code == 401, me.text
    # A far-off exp is a valid signed time: the token fails further on (its family is unknown).
    assert me.json()["error"]["code"] in {
        "invalid_token",
        "invalid_token_type",
        "token_expired",
        "unknown_account",
    }

    refresh = _token(settings, {**base, **claims}, typ="refresh")
    refreshed = await client.post("/auth/refresh", json={"refresh_token": refresh})
    assert refreshed.status_code == 401, refreshed.text
    assert refreshed.json()["error"]["code"]


ODD_HEADERS: list[object] = [
    ["HS256"],
    {"alg": ["HS256"]},
    {"alg": "none"},
    {"alg": "HS256", "kid": [1, 2]},
    {"alg": "HS256", "crit": ["exp"]},
    {"alg": "HS256", "crit": 5},
    {"alg": "HS256", "b64": False},
]


@pytest.mark.parametrize("header", ODD_HEADERS, ids=lambda h: repr(h)[:40])
async def test_odd_headers_are_a_401_json_error(
    client: httpx.AsyncClient, db: AsyncSession, settings: Settings, header: object
) -> None:
    user = await make_user(db, await make_tenant(db))
    token = _token(settings, {"sub": str(user.id), "tid": str(user.tenant_id)}, header=header)
    me = await client.get("/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 401, me.text
    assert me.json()["error"]["code"] == "invalid_token"

"""The ID token check on tokens a real provider issued, presented where they do not belong
(what the code flow's own token exchange cannot be made to deliver), and key rotation."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.sso.directory import ProviderDirectory
from app.sso.id_token import Expected, SsoRefused, verify_id_token
from tests.factories import login, make_tenant, make_user
from tests.sso.browser import configure, refusal, sign_in, token_from
from tests.sso.provider import (
    CLIENT_ID,
    CLIENT_SECRET,
    OTHER_CLIENT_ID,
    OTHER_CLIENT_SECRET,
    OpenIdProvider,
)


async def _refusal(
    settings: Settings, op: OpenIdProvider, token: str, expected: Expected
) -> str | None:
    directory = ProviderDirectory(settings)
    try:
        await verify_id_token(directory, await directory.metadata(op.issuer), token, expected)
    except SsoRefused as refused:
        return refused.code
    return None


def _expected(op: OpenIdProvider, nonce: str, client_id: str = CLIENT_ID) -> Expected:
    return Expected(issuer=op.issuer, client_id=client_id, nonce=nonce, leeway_seconds=0)


async def test_a_genuine_token_passes(settings: Settings, op: OpenIdProvider) -> None:
    issued = await token_from(op, "a@example.com", CLIENT_ID, CLIENT_SECRET)
    assert await _refusal(settings, op, issued.id_token, _expected(op, issued.nonce)) is None


async def test_a_token_issued_to_another_client_is_refused(
    settings: Settings, op: OpenIdProvider
) -> None:
    issued = await token_from(op, "a@example.com", OTHER_CLIENT_ID, OTHER_CLIENT_SECRET)
    code = await _refusal(settings, op, issued.id_token, _expected(op, issued.nonce))
    assert code == "id_token_wrong_audience"


async def test_a_token_replayed_into_another_sign_in_is_refused(
    settings: Settings, op: OpenIdProvider
) -> None:
    issued = await token_from(op, "a@example.com", CLIENT_ID, CLIENT_SECRET)
    code = await _refusal(settings, op, issued.id_token, _expected(op, "this-sign-in's-nonce"))
    assert code == "id_token_replayed"


async def test_a_token_of_another_issuer_is_refused(
    settings: Settings, op: OpenIdProvider, other_op: OpenIdProvider
) -> None:
    issued = await token_from(other_op, "a@example.com", CLIENT_ID, CLIENT_SECRET)
    # Checked against the configured provider: its keys do not include the other's.
    code = await _refusal(settings, op, issued.id_token, _expected(op, issued.nonce))
    assert code == "id_token_unknown_key"


@pytest.mark.parametrize("tampered", ["payload", "algorithm-none"])
async def test_a_tampered_token_is_refused(
    settings: Settings, op: OpenIdProvider, tampered: str
) -> None:
    issued = await token_from(op, "a@example.com", CLIENT_ID, CLIENT_SECRET)
    header, payload, signature = issued.id_token.split(".")
    if tampered == "payload":
        token = f"{header}.{payload[:-4]}AAAA.{signature}"
    else:  # eyJhbGciOiJub25lIn0 is {"alg":"none"}
        token = f"eyJhbGciOiJub25lIn0.{payload}."
    code = await _refusal(settings, op, token, _expected(op, issued.nonce))
    assert code == "id_token_invalid"


async def test_a_key_rotation_is_followed_with_one_fetch_and_no_more(
    app: FastAPI, client: httpx.AsyncClient, db: AsyncSession, rotating_op: OpenIdProvider
) -> None:
    """After the provider rotates its key, the next sign-in's unknown key id fetches the
    keys once and succeeds; another unknown key within the cool-down fetches nothing."""
    tenant = await make_tenant(db)
    admin = await login(client, await make_user(db, tenant, role="admin"))
    await configure(client, admin, rotating_op)

    assert (await sign_in(client, tenant, "r@example.com")).headers["location"] == "/"
    directory: ProviderDirectory = app.state.sso_directory
    assert directory.key_fetches == 1

    rotating_op.rotate()
    assert (await sign_in(client, tenant, "r@example.com")).headers["location"] == "/"
    assert directory.key_fetches == 2

    rotating_op.rotate()
    assert refusal(await sign_in(client, tenant, "r@example.com")) == "id_token_unknown_key"
    assert directory.key_fetches == 2, "a second unknown key within the cool-down: no fetch"

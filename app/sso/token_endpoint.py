"""Redeeming an authorization code at the provider's token endpoint (RFC 6749 §4.1.3, with
the PKCE verifier of RFC 7636), authenticated with the client secret."""

from __future__ import annotations

import base64
from urllib.parse import quote

import httpx

from app.config import Settings
from app.models import SsoProvider
from app.sso.directory import ProviderMetadata, ProviderUnavailable, check_url
from app.sso.id_token import SsoRefused
from app.sso.secrets import unseal


def basic_credentials(client_id: str, secret: str) -> str:
    """The `Authorization` header of client_secret_basic."""
    # RFC 6749 §2.3.1: each part form-urlencoded before the Basic encoding.
    pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


async def exchange_code(
    settings: Settings,
    metadata: ProviderMetadata,
    provider: SsoProvider,
    code: str,
    verifier: str,
    redirect_uri: str,
) -> str:
    """The ID token the provider's token endpoint gives for this code and PKCE verifier;
    `SsoRefused` when it refuses the code, `ProviderUnavailable` when it cannot answer."""
    secret = unseal(settings, provider.client_secret_encrypted)
    if secret is None:
        raise SsoRefused("provider_misconfigured", "the client secret must be entered again")
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": verifier,
    }
    headers = {"Accept": "application/json"}
    if "client_secret_basic" in metadata.token_auth_methods:
        headers["Authorization"] = basic_credentials(provider.client_id, secret)
    else:
        form |= {"client_id": provider.client_id, "client_secret": secret}
    check_url(metadata.token_endpoint)
    try:
        async with httpx.AsyncClient(timeout=settings.sso_http_timeout_seconds) as client:
            response = await client.post(metadata.token_endpoint, data=form, headers=headers)
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        raise ProviderUnavailable(f"token endpoint: {type(exc).__name__}") from exc
    if response.status_code in (400, 401):
        # An invalid_grant: the code was used already, expired, or not issued to this client.
        raise SsoRefused("code_refused", f"the provider refused the code: {response.text[:200]}")
    try:
        token = response.json().get("id_token") if response.status_code == 200 else None
    except ValueError:
        token = None
    if not isinstance(token, str):
        raise ProviderUnavailable(f"token endpoint answered {response.status_code}, no id_token")
    return token

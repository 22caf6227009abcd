"""What Threadline knows of each OpenID provider: its discovery document and signing keys,
fetched over HTTP and kept for a while, one cache per application.

Key rotation: an ID token signed with a key id the cached set lacks makes the set be fetched
again, once, and the token is checked against the new set. That forced fetch then waits
`sso_jwks_refetch_cooldown_seconds` before another may happen, so tokens with made-up key ids
cannot make Threadline hammer the provider (docs/adr/0081). Fetches of one issuer are
serialised, so a burst of sign-ins after a rotation fetches once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx
import jwt
from pydantic import JsonValue

from app.config import Settings
from app.core.json_types import JsonObject

logger = logging.getLogger(__name__)

MAX_DOCUMENT_BYTES = 512 * 1024
"""A discovery document or key set larger than this is no provider's."""


class ProviderUnavailable(Exception):
    """The provider could not be reached, or answered something unusable."""


@dataclass(frozen=True)
class ProviderMetadata:
    """The parts of a discovery document the flow uses."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    token_auth_methods: tuple[str, ...]
    signing_algorithms: tuple[str, ...]
    iss_parameter_supported: bool


@dataclass
class _Keys:
    by_kid: dict[str | None, jwt.PyJWK]
    fetched_at: float


@dataclass
class _IssuerCache:
    metadata: ProviderMetadata | None = None
    metadata_at: float = 0.0
    keys: _Keys | None = None
    forced_refetch_at: float | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def check_url(url: str) -> None:
    """Refuse (`ProviderUnavailable`) a provider URL no connection can be opened to: its port
    out of range fails deep in the socket layer otherwise."""
    try:
        _ = urlsplit(url).port
    except ValueError as exc:
        raise ProviderUnavailable(f"{url}: {exc}") from exc


async def fetch_json(settings: Settings, url: str) -> JsonObject:
    """GET a JSON object from a provider, bounded in time and size."""
    check_url(url)
    try:
        async with (
            httpx.AsyncClient(timeout=settings.sso_http_timeout_seconds) as client,
            client.stream("GET", url, headers={"Accept": "application/json"}) as response,
        ):
            if response.status_code != 200:
                raise ProviderUnavailable(f"{url} answered {response.status_code}")
            body = b""
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise ProviderUnavailable(f"{url} answered more than {MAX_DOCUMENT_BYTES} B")
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:  # ValueError: a bad port
        raise ProviderUnavailable(f"{url}: {type(exc).__name__}") from exc
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise ProviderUnavailable(f"{url} did not answer JSON") from exc
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url} did not answer a JSON object")
    return document


def _metadata(issuer: str, document: JsonObject) -> ProviderMetadata:
    # OpenID Connect Discovery 1.0 §4.3: the document's issuer must be exactly the one asked.
    if document.get("issuer") != issuer:
        raise ProviderUnavailable(
            f"the discovery document names issuer {document.get('issuer')!r}, not {issuer!r}"
        )
    endpoints = {}
    for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        value = document.get(name)
        if not isinstance(value, str) or not value.startswith(("https://", "http://")):
            raise ProviderUnavailable(f"the discovery document has no usable {name}")
        endpoints[name] = value
    methods = _strings(document.get("token_endpoint_auth_methods_supported"))
    algorithms = _strings(document.get("id_token_signing_alg_values_supported"))
    return ProviderMetadata(
        issuer=issuer,
        token_auth_methods=methods or ("client_secret_basic",),
        signing_algorithms=algorithms or ("RS256",),
        iss_parameter_supported=document.get("authorization_response_iss_parameter_supported")
        is True,
        **endpoints,
    )


def _strings(value: JsonValue | None) -> tuple[str, ...]:
    """A discovery document's list of names (anything else reads as none given)."""
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _key_set(document: JsonObject) -> dict[str | None, jwt.PyJWK]:
    keys: dict[str | None, jwt.PyJWK] = {}
    entries = document.get("keys")
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        try:
            key = jwt.PyJWK(entry)
        except (jwt.PyJWTError, ValueError, TypeError, KeyError):
            continue  # a key type this library cannot use: others may serve
        keys[key.key_id] = key
    return keys


class ProviderDirectory:
    """Discovery documents and key sets by issuer, for one application."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._issuers: dict[str, _IssuerCache] = {}
        self.key_fetches = 0
        """How many times a key set was fetched (what the bound on refetching bounds)."""

    def _cache(self, issuer: str) -> _IssuerCache:
        return self._issuers.setdefault(issuer, _IssuerCache())

    def _fresh(self, fetched_at: float) -> bool:
        return time.monotonic() - fetched_at < self.settings.sso_metadata_ttl_seconds

    async def metadata(self, issuer: str) -> ProviderMetadata:
        """The provider's discovery document (cached)."""
        cache = self._cache(issuer)
        async with cache.lock:
            if cache.metadata is None or not self._fresh(cache.metadata_at):
                url = issuer.rstrip("/") + "/.well-known/openid-configuration"
                cache.metadata = _metadata(issuer, await fetch_json(self.settings, url))
                cache.metadata_at = time.monotonic()
            return cache.metadata

    async def signing_key(self, metadata: ProviderMetadata, kid: str | None) -> jwt.PyJWK | None:
        """The provider's key with this id (or its only key, when the token names none);
        None when the provider has no such key even after fetching its keys again."""
        cache = self._cache(metadata.issuer)
        async with cache.lock:
            if cache.keys is None or not self._fresh(cache.keys.fetched_at):
                await self._fetch_keys(metadata, cache)
            found = _pick(cache.keys, kid)
            if found is not None:
                return found
            now = time.monotonic()
            cooldown = self.settings.sso_jwks_refetch_cooldown_seconds
            if cache.forced_refetch_at is not None and now - cache.forced_refetch_at < cooldown:
                return None
            cache.forced_refetch_at = now
            logger.info("sso: unknown signing key %r: fetching %s again", kid, metadata.jwks_uri)
            await self._fetch_keys(metadata, cache)
            return _pick(cache.keys, kid)

    async def _fetch_keys(self, metadata: ProviderMetadata, cache: _IssuerCache) -> None:
        self.key_fetches += 1
        document = await fetch_json(self.settings, metadata.jwks_uri)
        cache.keys = _Keys(_key_set(document), time.monotonic())


def _pick(keys: _Keys | None, kid: str | None) -> jwt.PyJWK | None:
    if keys is None:
        return None
    if kid is None:
        return next(iter(keys.by_kid.values())) if len(keys.by_kid) == 1 else None
    return keys.by_kid.get(kid)

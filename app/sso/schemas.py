"""The SSO settings as the admin API takes and shows them, and the sign-in page's options."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.json_types import NO_NUL

_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
# A claim name, and the scopes: printable characters without spaces (RFC 6749 §3.3).
_PRINTABLE = r"^[\x21-\x7e]+$"


def check_issuer(value: str) -> str:
    """Validator: an issuer is an https URL without query or fragment (OpenID Connect Core
    §2); http only on the loopback interface, where a test or a local provider runs."""
    parts = urlsplit(value)
    loopback = parts.scheme == "http" and parts.hostname in _LOOPBACK
    if not (parts.scheme == "https" or loopback) or not parts.hostname:
        raise ValueError("the issuer must be an https:// URL (http:// on loopback only)")
    if parts.query or parts.fragment:
        raise ValueError("the issuer has no query or fragment")
    return value


class SsoSettingsIn(BaseModel):
    """The tenant's OpenID provider, as an admin sets it."""

    model_config = ConfigDict(extra="forbid")

    display_name: str = Field(
        min_length=1, max_length=80, pattern=NO_NUL, description='The button: "Sign in with …".'
    )
    issuer: str = Field(
        max_length=500,
        pattern=NO_NUL,
        description="The provider's issuer; its discovery document is "
        "`<issuer>/.well-known/openid-configuration`.",
    )
    client_id: str = Field(min_length=1, max_length=500, pattern=_PRINTABLE)
    client_secret: str | None = Field(
        default=None,
        min_length=1,
        max_length=2000,
        pattern=NO_NUL,
        description="Write-only. Required when the tenant has no provider yet; omitted, the "
        "stored secret is kept.",
    )
    allowed_domains: list[str] = Field(
        min_length=1,
        max_length=50,
        description="E-mail domains whose users may sign in (and are created on first sign-in).",
    )
    scopes: str = Field(default="openid email profile", max_length=500, pattern=r"^[\x21-\x7e ]+$")
    groups_claim: str | None = Field(
        default=None,
        max_length=100,
        pattern=_PRINTABLE,
        description="The ID token claim listing the user's groups, read at every sign-in.",
    )
    enabled: bool = True
    password_login: bool = Field(
        default=True, description="False: the tenant's users may sign in only through SSO."
    )

    _issuer = field_validator("issuer")(check_issuer)

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        domains = [d.strip().lower().lstrip("@") for d in value]
        for domain in domains:
            if not _DOMAIN.fullmatch(domain):
                raise ValueError(f"{domain!r} is not a domain name")
        return sorted(set(domains))

    @field_validator("scopes")
    @classmethod
    def _scopes(cls, value: str) -> str:
        scopes = value.split()
        if "openid" not in scopes:
            raise ValueError("the scopes must include openid")
        return " ".join(dict.fromkeys(scopes))


class SsoSettingsOut(BaseModel):
    """The tenant's OpenID provider as the admin API shows it: never the secret."""

    display_name: str
    issuer: str
    client_id: str
    client_secret_set: bool = Field(description="Whether a usable client secret is stored.")
    allowed_domains: list[str]
    scopes: str
    groups_claim: str | None
    enabled: bool
    password_login: bool
    redirect_uri: str = Field(description="The redirect URI to register at the provider.")
    updated_at: datetime


class SignInOption(BaseModel):
    """A way to sign in that the sign-in page offers."""

    tenant_id: uuid.UUID
    display_name: str
    login_url: str = Field(description="Where the browser goes to sign in with the provider.")


class SignInOptions(BaseModel):
    """How the users of a tenant sign in."""

    password_login: bool
    sso: list[SignInOption]

"""The SSO settings as the admin API takes and shows them, and the sign-in page's options."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    field_validator,
)

from app.core.json_types import NO_NUL

# The schema states each rule the API enforces (the OpenAPI conformance test holds it to that).
# An issuer: https with a host, or http on the loopback interface only (where tests and local
# providers run); no query or fragment (OpenID Connect Core §2).
_PORT = r"(:([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?"
_PATH = _PORT + r"(/[^\s?#\x00]*)?"
ISSUER_PATTERN = (
    rf"^(https://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]){_PATH}"
    rf"|http://(127\.0\.0\.1|localhost|\[::1\]){_PATH})$"
)
# A domain name, optionally written with its "@".
DOMAIN_PATTERN = r"^@?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$"
# Printable words separated by spaces, one of them `openid`.
SCOPES_PATTERN = r"^ *([\x21-\x7e]+ +)*openid( +[\x21-\x7e]+)* *$"
# A claim name, a client id: printable characters without spaces.
_PRINTABLE = r"^[\x21-\x7e]+$"

Domain = Annotated[str, StringConstraints(max_length=254, pattern=DOMAIN_PATTERN)]


class SsoSettingsIn(BaseModel):
    """The tenant's OpenID provider, as an admin sets it."""

    model_config = ConfigDict(extra="forbid")

    display_name: str = Field(
        min_length=1, max_length=80, pattern=NO_NUL, description='The button: "Sign in with …".'
    )
    issuer: str = Field(
        max_length=500,
        pattern=ISSUER_PATTERN,
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
    allowed_domains: list[Domain] = Field(
        min_length=1,
        max_length=50,
        description="E-mail domains whose users may sign in (and are created on first sign-in).",
    )
    scopes: str = Field(default="openid email profile", max_length=500, pattern=SCOPES_PATTERN)
    groups_claim: str | None = Field(
        default=None,
        max_length=100,
        pattern=_PRINTABLE,
        description="The ID token claim listing the user's groups, read at every sign-in.",
    )
    enabled: StrictBool = True
    password_login: StrictBool = Field(
        default=True, description="False: the tenant's users may sign in only through SSO."
    )

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        return sorted({d.lower().lstrip("@") for d in value})

    @field_validator("scopes")
    @classmethod
    def _scopes(cls, value: str) -> str:
        return " ".join(dict.fromkeys(value.split()))


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

"""What Threadline takes from a checked ID token: the user's e-mail and groups."""

from __future__ import annotations

from app.core.json_types import JsonObject
from app.models import SsoProvider
from app.sso.id_token import SsoRefused

MAX_GROUPS = 500
MAX_GROUP_NAME = 200


def verified_email(claims: JsonObject, provider: SsoProvider) -> str:
    """The ID token's e-mail, lower-cased, if the tenant allows its domain."""
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email:
        raise SsoRefused("email_missing", "the provider sent no e-mail address")
    if claims.get("email_verified") is False:
        raise SsoRefused("email_unverified", "the provider has not verified the e-mail")
    email = email.strip().lower()
    if email.rsplit("@", 1)[1] not in provider.allowed_domains:
        raise SsoRefused("email_domain_refused", "the e-mail's domain is not allowed")
    return email


def group_names(claims: JsonObject, claim: str | None) -> list[str] | None:
    """The groups claim as a list of names; None when not configured or not sent (then
    memberships are left alone rather than emptied by a provider that stopped sending it)."""
    if not claim or claim not in claims:
        return None
    value = claims[claim]
    values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    names = [v.strip() for v in values if isinstance(v, str) and v.strip()]
    return list(dict.fromkeys(n[:MAX_GROUP_NAME] for n in names))[:MAX_GROUPS]

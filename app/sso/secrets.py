"""The client secret at rest: encrypted with a key derived from the JWT signing key, so a
database dump or backup does not hand out the tenant's identity-provider credentials.

Changing `THREADLINE_JWT_SECRET` makes stored secrets unreadable: the provider then refuses
to sign anyone in until an admin enters the secret again (docs/operations.md).
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken

from app.config import Settings

_CONTEXT = b"threadline/sso/client-secret/v1"


def _fernet(settings: Settings) -> Fernet:
    digest = hashlib.sha256(_CONTEXT + settings.jwt_signing_key().encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def seal(settings: Settings, secret: str) -> str:
    """The stored form of a client secret."""
    return _fernet(settings).encrypt(secret.encode()).decode()


def unseal(settings: Settings, sealed: str) -> str | None:
    """The client secret, or None when it was sealed under another signing key."""
    try:
        return _fernet(settings).decrypt(sealed.encode()).decode()
    except InvalidToken:
        return None

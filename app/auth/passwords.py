"""Argon2id password hashing, off the event loop (a hash costs tens of milliseconds)."""

from __future__ import annotations

import asyncio

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()
# Each hash takes ~64 MiB and a core for tens of milliseconds: bound how many run at once.
_HASHING = asyncio.Semaphore(4)
# Verified against when the e-mail is unknown, so response time does not reveal accounts.
_DUMMY_HASH = _hasher.hash("threadline-timing-equaliser")


async def hash_password(password: str) -> str:
    """Hash a new password with argon2id, in a worker thread."""
    async with _HASHING:
        return await asyncio.to_thread(_hasher.hash, password)


def _verify(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


async def verify_password(password_hash: str | None, password: str) -> bool:
    """Check a password against its stored hash; a missing hash costs the same time and fails."""
    async with _HASHING:
        if password_hash is None:
            await asyncio.to_thread(_verify, _DUMMY_HASH, password)
            return False
        return await asyncio.to_thread(_verify, password_hash, password)

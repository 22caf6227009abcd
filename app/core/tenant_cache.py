"""Per-process values about a tenant, kept for a short time.

Some tenant facts are read on every turn (guardrail policy, limit overrides, whether the
knowledge base has documents) but change rarely; reading them once per interval saves a query
per turn. Another process sees a change when its copy expires.
"""

from __future__ import annotations

import time
import uuid
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class TenantCache(Generic[T]):
    """Per-process values about tenants, each kept until its time to live runs out."""

    def __init__(self) -> None:
        self._known: dict[uuid.UUID, tuple[T, float]] = {}

    def get(self, tenant_id: uuid.UUID) -> T | None:
        """The value if it is cached and still fresh."""
        cached = self._known.get(tenant_id)
        return cached[0] if cached is not None and cached[1] > time.monotonic() else None

    def put(self, tenant_id: uuid.UUID, value: T, ttl_seconds: float) -> T:
        """Remember a tenant's value for `ttl_seconds`; returns the value."""
        self._known[tenant_id] = (value, time.monotonic() + ttl_seconds)
        return value

    def invalidate(self, tenant_id: uuid.UUID) -> None:
        """Forget a tenant's value in this process, so the next read fetches it."""
        self._known.pop(tenant_id, None)


class TenantInvalidator(Protocol):
    """Something cached per tenant that a change to the tenant's data must clear."""

    def invalidate(self, tenant_id: uuid.UUID) -> None:
        """Forget what is cached for the tenant."""

"""A tenant's guardrail and triage policy: the platform defaults overlaid with what the
tenant's admins set (`tenants.settings["guardrails"]`), and whether it has FAQs at all.

Read on every turn, so it is cached per process for a short time (`tenant_policy_cache_seconds`)
and dropped at once when this process changes it: a tenant without FAQs or topics costs no
database round trip per turn, and a change made elsewhere shows within the TTL.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core.json_types import NO_NUL, JsonObject, json_number
from app.core.tenant_cache import TenantCache
from app.faqs.thresholds import faq_threshold
from app.guardrails.repository import policy_inputs

Action = Literal["block", "flag", "off"]
SETTINGS_KEY: Final = "guardrails"


class GuardrailOverrides(BaseModel):
    """What a tenant admin may set; an absent (null) field keeps the platform default."""

    model_config = ConfigDict(extra="forbid")

    injection: Action | None = None
    abuse: Action | None = None
    pii: Action | None = None
    topics: list[Annotated[str, Field(pattern=NO_NUL)]] | None = Field(default=None, max_length=100)
    """Allowed topics (words or short phrases); empty or null: any topic."""
    faq_threshold: float | None = Field(default=None, gt=0, le=1)
    smalltalk: StrictBool | None = None

    _number = field_validator("faq_threshold", mode="before")(json_number)


@dataclass(frozen=True)
class TenantPolicy:
    """A tenant's guardrail and triage settings: the environment's defaults with its overrides."""

    injection: Action
    abuse: Action
    pii: Action
    topics: tuple[str, ...]
    faq_threshold: float
    smalltalk: bool
    faq_count: int = 0
    overrides: JsonObject = field(default_factory=dict)
    language: str = "english"
    """The tenant's text-search language (ADR 0076): what the extractive answer stems in."""


def resolve(
    settings: Settings, stored: JsonObject, faq_count: int, language: str | None = None
) -> TenantPolicy:
    """The tenant's policy: its stored overrides over the environment's defaults."""
    overrides = GuardrailOverrides.model_validate(stored or {})
    return TenantPolicy(
        injection=overrides.injection or settings.guard_injection,
        abuse=overrides.abuse or settings.guard_abuse,
        pii=overrides.pii or settings.guard_pii,
        topics=tuple(t.strip() for t in overrides.topics or () if t.strip()),
        faq_threshold=overrides.faq_threshold or faq_threshold(settings),
        smalltalk=(
            settings.smalltalk_fast_path if overrides.smalltalk is None else overrides.smalltalk
        ),
        faq_count=faq_count,
        overrides=overrides.model_dump(exclude_none=True),
        language=language or "english",
    )


class TenantPolicies:
    """The per-process cache of tenant policies."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._known: TenantCache[TenantPolicy] = TenantCache()

    async def get(self, db: AsyncSession, tenant_id: uuid.UUID) -> TenantPolicy:
        """The tenant's policy, from the cache while it is fresh."""
        cached = self._known.get(tenant_id)
        if cached is not None:
            return cached
        policy = await self.load(db, tenant_id)
        return self._known.put(tenant_id, policy, self.settings.tenant_policy_cache_seconds)

    def cached(self, tenant_id: uuid.UUID) -> TenantPolicy | None:
        """The policy if it is cached and fresh: lets a node skip opening a transaction."""
        return self._known.get(tenant_id)

    async def load(self, db: AsyncSession, tenant_id: uuid.UUID) -> TenantPolicy:
        """The tenant's policy, read from the database (no cache)."""
        stored, count = await policy_inputs(db, tenant_id)
        return resolve(self.settings, stored.get(SETTINGS_KEY) or {}, count, stored.get("language"))

    def invalidate(self, tenant_id: uuid.UUID) -> None:
        """Forget the tenant's policy now (call through `on_commit`, after the change is stored)."""
        self._known.invalidate(tenant_id)

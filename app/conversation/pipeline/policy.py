"""The tenant's guardrail policy as a turn reads it (guard_input, triage)."""

from __future__ import annotations

import uuid

from app.conversation.pipeline.context import TurnContext
from app.guardrails.policy import TenantPolicy


async def tenant_policy(ctx: TurnContext, tenant: uuid.UUID) -> TenantPolicy:
    """The tenant's policy; a transaction only when the process cache has none (or it aged)."""
    policy = ctx.policies.cached(tenant)
    if policy is None:
        async with ctx.reads(tenant) as db:
            policy = await ctx.policies.get(db, tenant)
    return policy

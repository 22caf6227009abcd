"""FastAPI dependencies of the guardrail endpoints."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.guardrails.policy import TenantPolicies


async def get_policies(request: Request) -> TenantPolicies:
    """This process's cache of tenant policies (built in lifespan)."""
    policies: TenantPolicies = request.app.state.resources.turn_context.policies
    return policies


PoliciesDep = Annotated[TenantPolicies, Depends(get_policies)]

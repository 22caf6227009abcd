"""FastAPI dependencies of the FAQ endpoints."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.core.tenant_cache import TenantInvalidator
from app.embeddings.base import Embedder


async def get_embedder(request: Request) -> Embedder:
    """The embedder FAQ questions are embedded with (the retriever's)."""
    embedder: Embedder = request.app.state.resources.retriever.embedder
    return embedder


async def get_policy_cache(request: Request) -> TenantInvalidator:
    """The cached tenant policies, which count a tenant's FAQ entries."""
    policies: TenantInvalidator = request.app.state.resources.turn_context.policies
    return policies


EmbedderDep = Annotated[Embedder, Depends(get_embedder)]
PolicyCacheDep = Annotated[TenantInvalidator, Depends(get_policy_cache)]

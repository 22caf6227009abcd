"""FastAPI dependencies of the knowledge-base endpoints."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.core.tenant_cache import TenantInvalidator
from app.retrieval.hybrid import HybridRetriever


async def get_retriever(request: Request) -> HybridRetriever:
    """The hybrid retriever the chat uses (built in lifespan)."""
    retriever: HybridRetriever = request.app.state.resources.retriever
    return retriever


async def get_kb_status(request: Request) -> TenantInvalidator:
    """The cached answer to "does this tenant have documents?"."""
    status: TenantInvalidator = request.app.state.resources.turn_context.kb_status
    return status


RetrieverDep = Annotated[HybridRetriever, Depends(get_retriever)]
KbStatusDep = Annotated[TenantInvalidator, Depends(get_kb_status)]

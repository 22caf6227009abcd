"""FastAPI dependencies of the session endpoints."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.conversation.service.sessions import CachedHistory


async def get_history(request: Request) -> CachedHistory:
    """The cache of sessions' recent turns (built in lifespan)."""
    history: CachedHistory = request.app.state.resources.history
    return history


HistoryDep = Annotated[CachedHistory, Depends(get_history)]

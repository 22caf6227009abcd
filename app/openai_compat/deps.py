"""The OpenAI-compatible endpoints' dependency: the completion service over the chat service
(read from the application's resources, as app/conversation/endpoints/deps.py does)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.config import Settings
from app.conversation.endpoints.deps import get_chat_service
from app.conversation.service.sessions import CachedHistory
from app.openai_compat.service import CompletionService


async def get_completion_service(request: Request) -> CompletionService:
    """Chat completions over this application's chat service."""
    resources = request.app.state.resources
    settings: Settings = resources.settings
    history: CachedHistory = resources.history
    return CompletionService(await get_chat_service(request), settings.history_turns, history)


CompletionServiceDep = Annotated[CompletionService, Depends(get_completion_service)]

"""The chat endpoints' dependencies: the chat service, built from the application's resources
(read as typed locals: endpoint modules never import the composition root), and the caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.auth.principal import CurrentPrincipal, Principal
from app.chat.guards import ChatGuards
from app.chat.runner import TurnRunner
from app.chat.service import ChatService
from app.config import Settings
from app.core.deps import DbSession


async def get_chat_service(request: Request) -> ChatService:
    """The chat service over this application's settings, guards and runner."""
    resources = request.app.state.resources
    settings: Settings = resources.settings
    guards: ChatGuards = resources.guards
    runner: TurnRunner = resources.runner
    return ChatService(settings, guards, runner)


async def get_caller(principal: CurrentPrincipal, db: DbSession) -> Principal:
    """The authenticated caller, the request's transaction (authentication's reads, nothing
    written) ended at once: a turn, or a retry waiting for the first answer, may last a whole
    model call and must not hold a pooled connection meanwhile. The service runs its steps in
    transactions of its own."""
    await db.rollback()
    return principal


ChatServiceDep = Annotated[ChatService, Depends(get_chat_service)]
Caller = Annotated[Principal, Depends(get_caller)]

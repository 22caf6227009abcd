"""The chat endpoints' dependency: the chat service, built from the application's resources
(read as typed locals: endpoint modules never import the composition root)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.config import Settings
from app.conversation.durability.guards import ChatGuards
from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.runner import TurnRunner
from app.conversation.service.chat import ChatService


async def get_chat_service(request: Request) -> ChatService:
    """The chat service over this application's settings, guards, runner and database."""
    resources = request.app.state.resources
    settings: Settings = resources.settings
    guards: ChatGuards = resources.guards
    runner: TurnRunner = resources.runner
    context: TurnContext = resources.turn_context
    return ChatService(settings, guards, runner, context.transactions, context.embedder)


ChatServiceDep = Annotated[ChatService, Depends(get_chat_service)]

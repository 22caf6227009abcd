"""The chat endpoints' dependency: the chat service, built from the application's resources
(read as typed locals: endpoint modules never import the composition root)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Depends, Request

from app.auth.principal import BearerToken, token_user
from app.config import Settings
from app.conversation.durability.guards import ChatGuards
from app.conversation.pipeline.context import TurnContext
from app.conversation.pipeline.runner import TurnRunner
from app.conversation.service.chat import ChatService
from app.core.deps import SettingsDep


async def get_chat_service(request: Request) -> ChatService:
    """The chat service over this application's settings, guards, runner and database."""
    resources = request.app.state.resources
    settings: Settings = resources.settings
    guards: ChatGuards = resources.guards
    runner: TurnRunner = resources.runner
    context: TurnContext = resources.turn_context
    return ChatService(settings, guards, runner, context.transactions, context.embedder)


ChatServiceDep = Annotated[ChatService, Depends(get_chat_service)]


async def refuse_a_full_follower(
    turn_id: uuid.UUID, request: Request, settings: SettingsDep, bearer: BearerToken
) -> None:
    """A resume by a user who already follows this turn as many times as allowed is refused
    before authentication reads PostgreSQL, on the token's signature alone. Issue 33: 300 resumes
    at once cost the server about 6 ms each to refuse after authenticating, 2 s in all, and
    every other connection waited behind them in the accept queue (`/healthz` p95 1.1 s)."""
    user_id = token_user(settings, bearer)
    if user_id is not None:
        guards: ChatGuards = request.app.state.resources.guards
        guards.follows.refuse_if_turn_full(user_id, turn_id)

"""FastAPI dependencies of the privacy endpoints."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.privacy.service import TurnStopper


async def get_turn_stopper(request: Request) -> TurnStopper:
    """What stops a running turn (the chat domain's stream registry, built in lifespan)."""
    streams: TurnStopper = request.app.state.resources.guards.streams
    return streams


TurnStopperDep = Annotated[TurnStopper, Depends(get_turn_stopper)]

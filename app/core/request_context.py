"""The request id, carried in a context variable so logs and error bodies can include it."""

from __future__ import annotations

from contextvars import ContextVar, Token

_request_id: ContextVar[str | None] = ContextVar("request_id", default=None)


def current_request_id() -> str | None:
    """The id of the request being handled here, if any."""
    return _request_id.get()


def set_request_id(value: str | None) -> Token[str | None]:
    """Set the current request id; returns the token to reset it with."""
    return _request_id.set(value)


def reset_request_id(token: Token[str | None]) -> None:
    """Restore the request id that was current before `set_request_id`."""
    _request_id.reset(token)

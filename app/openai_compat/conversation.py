"""A client's own conversation id, sent as a header, as the session of its messages.

OpenAI front-ends keep conversations of their own and send no Threadline session. Some name
the conversation in a header: Open WebUI sends `X-OpenWebUI-Chat-Id` (with
`ENABLE_FORWARD_USER_INFO_HEADERS=true`), proxies and other clients a generic
`X-Conversation-Id`. The list stays this short on purpose: each header is a promise about
what a client's value means. The session's id is derived from the value, the caller's tenant
and user (app/openai_compat/service.py), so no mapping is stored and another user's identical
id names another session (docs/adr/0063, amending 0038).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.core.errors import BadRequest
from app.core.json_types import JsonObject

OPENWEBUI_CHAT_HEADER = "X-OpenWebUI-Chat-Id"
CONVERSATION_HEADER = "X-Conversation-Id"
MAX_CHAT_ID_CHARS = 200
# Printable ASCII, no space at either end (HTTP strips those, so they could not arrive).
CHAT_ID_PATTERN = r"^[\x21-\x7E](?:[\x20-\x7E]*[\x21-\x7E])?$"
CHAT_ID_SCHEMA: JsonObject = {
    "minLength": 1,
    "maxLength": MAX_CHAT_ID_CHARS,
    "pattern": CHAT_ID_PATTERN,
}
"""What the OpenAPI document says of a conversation id (checked here, for a clear error)."""


@dataclass(frozen=True)
class ClientConversation:
    """A client's conversation id, checked: 1 to 200 printable ASCII characters."""

    chat_id: str


def _checked(header: str, value: str) -> str:
    """`value` if it is a usable conversation id; else a 400 naming the header."""
    if len(value) > MAX_CHAT_ID_CHARS:
        raise BadRequest(
            f"{header} is longer than {MAX_CHAT_ID_CHARS} characters.",
            code="invalid_conversation_id",
        )
    if not re.fullmatch(CHAT_ID_PATTERN, value):
        raise BadRequest(
            f"{header} must be 1 to {MAX_CHAT_ID_CHARS} printable ASCII characters.",
            code="invalid_conversation_id",
        )
    return value


def client_conversation(
    openwebui_chat_id: str | None, conversation_id: str | None
) -> ClientConversation | None:
    """The conversation the request's headers name, if any: Open WebUI's chat id, else the
    generic one (both are checked: a malformed header is refused even when unused)."""
    named = [
        _checked(header, value)
        for header, value in (
            (OPENWEBUI_CHAT_HEADER, openwebui_chat_id),
            (CONVERSATION_HEADER, conversation_id),
        )
        if value is not None
    ]
    return ClientConversation(named[0]) if named else None

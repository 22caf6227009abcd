"""A client's own conversation id, sent as a header, as the session of its messages.

OpenAI front-ends keep conversations of their own and send no Threadline session. Some name
the conversation in a header: Open WebUI sends `X-OpenWebUI-Chat-Id` (with
`ENABLE_FORWARD_USER_INFO_HEADERS=true`), proxies and other clients a generic
`X-Conversation-Id`. The list stays this short on purpose: each header is a promise about
what a client's value means. The session's id is derived from the value, the caller's tenant
and user (app/openai_compat/service.py), so no mapping is stored and another user's identical
id names another session (docs/adr/0038-openai-and-mcp-faces.md, addendum).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.errors import BadRequest

OPENWEBUI_CHAT_HEADER = "X-OpenWebUI-Chat-Id"
CONVERSATION_HEADER = "X-Conversation-Id"
MAX_CHAT_ID_CHARS = 200


@dataclass(frozen=True)
class ClientConversation:
    """A client's conversation id, checked: 1 to 200 printable ASCII characters."""

    chat_id: str


def _checked(header: str, value: str) -> str:
    """`value` if it is a usable conversation id; else a 400 naming the header."""
    if not value.strip():
        raise BadRequest(f"{header} is empty.", code="invalid_conversation_id")
    if len(value) > MAX_CHAT_ID_CHARS:
        raise BadRequest(
            f"{header} is longer than {MAX_CHAT_ID_CHARS} characters.",
            code="invalid_conversation_id",
        )
    if not (value.isascii() and value.isprintable()):
        raise BadRequest(
            f"{header} must be printable ASCII characters.", code="invalid_conversation_id"
        )
    return value


def client_conversation(
    openwebui_chat_id: str | None, conversation_id: str | None
) -> ClientConversation | None:
    """The conversation the request's headers name, if any. Both headers given must agree:
    two different ids are a misconfigured client or proxy, not a choice to make silently."""
    found = {
        header: _checked(header, value)
        for header, value in (
            (OPENWEBUI_CHAT_HEADER, openwebui_chat_id),
            (CONVERSATION_HEADER, conversation_id),
        )
        if value is not None
    }
    if len(set(found.values())) > 1:
        raise BadRequest(
            f"{OPENWEBUI_CHAT_HEADER} and {CONVERSATION_HEADER} name different conversations.",
            code="conflicting_conversation",
        )
    return ClientConversation(next(iter(found.values()))) if found else None

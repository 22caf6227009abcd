"""EML (stdlib `email`): the message's headers and body (plain text, or its HTML), then each
text attachment read as its own format, as a section named after the attachment."""

from __future__ import annotations

from collections.abc import Callable
from email import message_from_bytes, policy
from email.message import EmailMessage

from app.core.location import SECTION_SEPARATOR, Location
from app.ingestion.formats.base import Block, Budget, Extracted

_TEXT_ATTACHMENTS = ("text/", "application/json", "message/rfc822")
MAX_ATTACHMENT_DEPTH = 3

TextReader = Callable[[bytes, Budget, int], Extracted]


def read(data: bytes, budget: Budget, read_attached: TextReader, depth: int = 0) -> Extracted:
    """The blocks of a mail message; `read_attached` reads a text attachment by its content."""
    message = message_from_bytes(data, policy=policy.default)
    assert isinstance(message, EmailMessage)
    subject = " ".join(str(message.get("subject", "") or "").split())
    headers = [
        f"{name}: {' '.join(str(message.get(name)).split())}"
        for name in ("From", "To", "Cc", "Date", "Subject")
        if message.get(name)
    ]
    where = Location(section=subject) if subject else Location()
    blocks = [Block("text", budget.take("\n".join(headers)), where)] if headers else []
    body = message.get_body(preferencelist=("plain", "html"))
    if isinstance(body, EmailMessage):
        content = _decoded(body)
        if content.strip():
            blocks += _nested(read_attached(content, budget, depth + 1).blocks, subject)
    if depth >= MAX_ATTACHMENT_DEPTH:
        return Extracted(blocks)
    for part in message.iter_attachments():
        if not isinstance(part, EmailMessage):
            continue
        kind = part.get_content_type()
        if not kind.startswith(_TEXT_ATTACHMENTS):
            continue  # binary attachments are not read (no nested archives)
        payload = _decoded(part)
        if not payload.strip():
            continue
        name = part.get_filename() or kind
        section = SECTION_SEPARATOR.join(p for p in (subject, name) if p)
        blocks += _nested(read_attached(payload, budget, depth + 1).blocks, section)
    return Extracted(blocks)


def _nested(blocks: list[Block], section: str) -> list[Block]:
    """Blocks of a body or an attachment, their sections under the message's."""
    if not section:
        return blocks
    nested = []
    for block in blocks:
        where = Location(**block.location)
        inner = where.get("section")
        where["section"] = (
            f"{section}{SECTION_SEPARATOR}{inner}" if inner and inner != section else section
        )
        nested.append(Block(block.kind, block.text, where, block.header, block.row))
    return nested


def _decoded(part: EmailMessage) -> bytes:
    """A part's content as UTF-8 (text in its declared charset), a nested message as bytes."""
    try:
        content = part.get_content()
    except (LookupError, ValueError, KeyError):  # an unknown charset or a broken encoding
        raw = part.get_payload(decode=True)
        return raw if isinstance(raw, bytes) else b""
    if isinstance(content, str):
        return content.encode("utf-8")
    if isinstance(content, EmailMessage):
        return content.as_bytes()
    return content if isinstance(content, bytes) else b""

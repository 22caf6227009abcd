"""What the knowledge base covers, for a new chat: the newest documents' titles, a few of their
headings, and three questions drawn from them (no model: headings make the questions)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from app.knowledge.repository import DocumentRepository

TOPICS = 6
HEADINGS = 4
OPENING_CHUNKS = 3
SUGGESTIONS = 3
_HEADING = re.compile(r"^#{1,4}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_FILE_NAME = re.compile(r"\.(md|markdown|txt|pdf)$", re.IGNORECASE)
_MAX_HEADING = 80


@dataclass
class Topic:
    """A document people can ask about: its title and its first headings."""

    title: str
    headings: list[str] = field(default_factory=list)


@dataclass
class Overview:
    """What a tenant's knowledge base covers: ready documents, topics, suggested questions."""

    documents: int
    topics: list[Topic]
    suggestions: list[str]


def headings_of(texts: list[str]) -> list[str]:
    """The Markdown headings in these texts, in order, each once, short ones only."""
    seen: list[str] = []
    for text in texts:
        for match in _HEADING.finditer(text):
            heading = " ".join(match.group(1).split())
            if heading and len(heading) <= _MAX_HEADING and heading not in seen:
                seen.append(heading)
    return seen


def topic(title: str, headings: list[str]) -> Topic:
    """A document as a topic: a file name gives way to its first heading (or else to its
    words), and a heading that only repeats the title is not listed again."""
    if _FILE_NAME.search(title):
        if headings:
            title = headings[0]
        else:  # 'refund-policy.txt' -> 'Refund policy'
            words = " ".join(re.split(r"[-_\s]+", _FILE_NAME.sub("", title))).strip() or title
            title = words[:1].upper() + words[1:]
    rest = [h for h in headings if h.casefold() != title.casefold()]
    return Topic(title, rest[:HEADINGS])


def _lower_first(text: str) -> str:
    """'Refunds' -> 'refunds', but 'API keys' and 'SSO' stay as written."""
    word = text.split(" ", 1)[0]
    if len(word) > 1 and word[1].isupper():
        return text
    return text[:1].lower() + text[1:]


def suggestions(topics: list[Topic]) -> list[str]:
    """Up to three questions, one topic after another: about a heading where it has one,
    else about the document as a whole."""
    asked: list[str] = []
    rounds = max((len(t.headings) for t in topics), default=0) + 1
    for depth in range(rounds):
        for t in topics:
            if depth < len(t.headings):
                question = f"What does “{t.title}” say about {_lower_first(t.headings[depth])}?"
            elif depth == len(t.headings) == 0:
                question = f"What is “{t.title}” about?"
            else:
                continue
            if question not in asked:
                asked.append(question)
            if len(asked) == SUGGESTIONS:
                return asked
    return asked


async def overview(db: AsyncSession, tenant_id: uuid.UUID) -> Overview:
    """The tenant's knowledge base at a glance (ready documents only)."""
    documents = DocumentRepository(db, tenant_id)
    titles = await documents.ready_titles(TOPICS)
    texts: dict[uuid.UUID, list[str]] = {}
    for document_id, text in await documents.opening_texts([i for i, _ in titles], OPENING_CHUNKS):
        texts.setdefault(document_id, []).append(text)
    topics = [topic(title, headings_of(texts.get(i, []))) for i, title in titles]
    return Overview(await documents.ready_count(), topics, suggestions(topics))

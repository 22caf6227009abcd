"""Stored turns replayed to a user who lost access to some of their sources: the turn keeps
its record, but the user is shown only what they may still see. A source of a document they
may no longer see loses its title and snippet (`withheld: true`), and the manifest says
which (`access.withheld_sources`) (issue 30, item 4). A source whose document was deleted
is shown as stored: nobody lost access to it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.access.repository import document_collections
from app.core.db import visible_collections

HIDDEN_FIELDS = ("title", "snippet", "text")


def _kb_document(source: Any) -> uuid.UUID | None:
    if not isinstance(source, dict) or source.get("kind") != "kb":
        return None
    try:
        return uuid.UUID(str(source.get("source_id")))
    except ValueError:
        return None


def cited_documents(manifests: Sequence[Any]) -> set[uuid.UUID]:
    """The knowledge-base documents these manifests' (or answers') sources come from."""
    return {
        doc
        for manifest in manifests
        if isinstance(manifest, dict)
        for source in manifest.get("sources") or []
        if (doc := _kb_document(source)) is not None
    }


async def withhold_sources(
    db: AsyncSession, tenant_id: uuid.UUID, manifests: Sequence[Any]
) -> list[Any]:
    """These stored manifests as the caller may see them now (new dicts; the rest as is):
    what `db` is narrowed to."""
    narrowed = visible_collections(db)
    if narrowed is None:  # not narrowed: everything is visible
        return list(manifests)
    return await _withhold(db, tenant_id, manifests, narrowed)


async def _withhold(
    db: AsyncSession, tenant_id: uuid.UUID, manifests: Sequence[Any], visible: Sequence[uuid.UUID]
) -> list[Any]:
    documents = cited_documents(manifests)
    if not documents:
        return list(manifests)
    allowed = set(visible)
    lost = {
        doc
        for doc, collection in (
            await document_collections(db, tenant_id, sorted(documents))
        ).items()
        if collection not in allowed
    }
    if not lost:  # a deleted document's source is shown as stored
        return list(manifests)
    return [_withheld(m, lost) for m in manifests]


async def withhold_answer(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    answer: Mapping[str, Any],
    visible: Sequence[uuid.UUID],
) -> Mapping[str, Any]:
    """A stored answer replayed (an Idempotency-Key's retry: the `/chat` response, or a
    stream's `sources` or `done`) as a caller who may see the `visible` collections may see
    it now: its manifest (`context_metadata`) and its public `sources` withheld as the turns
    listing withholds them, in one read; `answer` itself when nothing is withheld (ADR
    0087). `db` need not be narrowed: the read is of ids only."""
    sources = {"sources": answer.get("sources") or []}
    manifest, shown = await _withhold(
        db, tenant_id, [answer.get("context_metadata"), sources], visible
    )
    if manifest is answer.get("context_metadata") and shown is sources:
        return answer
    withheld = {**answer, "context_metadata": manifest, "sources": shown["sources"]}
    if "context_metadata" not in answer:  # a `sources` event's data has only its sources
        del withheld["context_metadata"]
    if "sources" not in answer:  # a `done` without them: its stream's `sources` event has them
        del withheld["sources"]
    return withheld


def _withheld(manifest: Any, lost: set[uuid.UUID]) -> Any:
    if not isinstance(manifest, dict) or not manifest.get("sources"):
        return manifest
    sources, hidden = [], []
    for source in manifest["sources"]:
        doc = _kb_document(source)
        if doc is None or doc not in lost:
            sources.append(source)
            continue
        kept = {k: v for k, v in source.items() if k not in HIDDEN_FIELDS}
        sources.append({**kept, "withheld": True})
        hidden.append(source.get("n", source.get("id")))
    if not hidden:
        return manifest
    access = dict(manifest.get("access") or {})
    access["withheld_sources"] = hidden
    return {**manifest, "sources": sources, "access": access}

"""Stored turns replayed to a user who lost access to some of their sources: the turn keeps
its record, but the user is shown only what they may still see. A source of a document they
may no longer see loses its title and snippet (`withheld: true`), and the manifest says
which (`access.withheld_sources`) (issue 30, item 4). A source whose document was deleted
is shown as stored: nobody lost access to it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
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


async def withhold_sources(
    db: AsyncSession, tenant_id: uuid.UUID, manifests: Sequence[Any]
) -> list[Any]:
    """These stored manifests as the caller may see them now (new dicts; the rest as is)."""
    documents = {
        doc
        for manifest in manifests
        if isinstance(manifest, dict)
        for source in manifest.get("sources") or []
        if (doc := _kb_document(source)) is not None
    }
    narrowed = visible_collections(db)
    if narrowed is None or not documents:  # not narrowed: everything is visible
        return list(manifests)
    allowed = set(narrowed)
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

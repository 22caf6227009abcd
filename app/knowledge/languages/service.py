"""A tenant's text-search language and a document's own (ADR 0076). Never commits.

The language is one of PostgreSQL's built-in text-search configurations (english, dutch,
german, simple…). Chunks are analysed with their document's own language, else with their
tenant's; a question is analysed with every language the tenant's chunks are in
(`app.retrieval.repository`). Choosing another language re-analyses the tenant's chunks in
the background (`app.knowledge.languages.job`); until that ends both languages are searched.
"""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import NotFound, UnprocessableEntity
from app.core.jobs import enqueue_after_commit
from app.core.on_commit import on_commit
from app.guardrails.policy import TenantPolicies
from app.knowledge.languages.job import rebuild_job
from app.knowledge.languages.repository import (
    IndexProgress,
    configurations,
    index_progress,
    tenant_language,
)
from app.knowledge.schemas import LexicalIndexOut, TenantSettingsOut
from app.tenants.repository import lock_tenant_settings, store_tenant_settings

SETTINGS_KEY = "language"


async def checked_language(db: AsyncSession, name: str) -> str:
    """`name` if PostgreSQL has a built-in text-search configuration of that name (any
    case), else 422 `unknown_language` naming those it has."""
    wanted = name.strip().lower()
    known = await configurations(db)
    if wanted not in known:
        raise UnprocessableEntity(
            f"{name!r} is not a text-search language; choose one of: {', '.join(known)}.",
            code="unknown_language",
        )
    return wanted


def _index(progress: IndexProgress) -> LexicalIndexOut:
    remaining = progress.chunks - progress.analysed
    return LexicalIndexOut(
        language=progress.language,
        status="rebuilding" if remaining else "ready",
        chunks=progress.chunks,
        analysed=progress.analysed,
        progress=round(progress.analysed / progress.chunks, 4) if progress.chunks else 1.0,
    )


async def describe(db: AsyncSession, tenant_id: uuid.UUID) -> TenantSettingsOut:
    """The tenant's language, the languages it may choose, and how far its lexical index
    is analysed with it (the chunks that follow the tenant: not those of a document that
    has its own language)."""
    return TenantSettingsOut(
        language=await tenant_language(db, tenant_id),
        languages=await configurations(db),
        lexical_index=_index(await index_progress(db, tenant_id)),
    )


async def set_language(
    db: AsyncSession, tenant_id: uuid.UUID, name: str, policies: TenantPolicies
) -> TenantSettingsOut:
    """Store the tenant's language; once that commits, a job re-analyses the chunks still
    in another one (enqueued again when nothing changed but some are left: a rebuild that
    died is resumed by setting the language again)."""
    language = await checked_language(db, name)
    current = await lock_tenant_settings(db, tenant_id)
    if current is None:
        raise NotFound("No such tenant.", code="tenant_not_found")
    await store_tenant_settings(db, tenant_id, {**current, "language": language})
    on_commit(db, lambda: policies.invalidate(tenant_id))  # the next answer stems in it
    described = await describe(db, tenant_id)
    if described.lexical_index.status == "rebuilding":
        enqueue_after_commit(db, rebuild_job(tenant_id))
    return described

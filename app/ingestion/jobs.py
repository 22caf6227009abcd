"""The ingestion job: one name, run in-process or by a Celery worker."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from app.core.jobs import Job
from app.ingestion.pipeline import IngestionDeps, ingest
from app.ingestion.repository import Kind
from app.retrieval.status import KnowledgeBaseStatus

INGEST = "threadline.ingest"


def ingest_job(kind: Kind, tenant_id: uuid.UUID, object_id: uuid.UUID) -> Job:
    """The job that ingests one document or attachment of a tenant."""
    return Job(INGEST, {"kind": kind, "tenant_id": str(tenant_id), "object_id": str(object_id)})


def ingestion_handlers(
    deps: IngestionDeps, kb_status: KnowledgeBaseStatus | None = None
) -> dict[str, Callable[..., Awaitable[Any]]]:
    """The job runner's handler for ingestion jobs, by job name."""

    async def run(kind: Kind, tenant_id: str, object_id: str) -> str:
        tenant = uuid.UUID(tenant_id)
        status = await ingest(deps, kind, tenant, uuid.UUID(object_id))
        deps.preparer.release_memory()
        if kind == "kb" and kb_status is not None:
            kb_status.invalidate(tenant)  # a new ready document is searchable at once
        return status

    return {INGEST: run}

"""Ingest one document or attachment: extract → sanitise → chunk → embed → index.

Status moves `pending → processing → ready | failed`, with `progress` (0 to 1) committed as
batches are embedded and a readable `error` on failure. Chunks are written in the same
transaction that marks the document ready, so a reader never sees half an index; a retry
replaces whatever an earlier attempt wrote.

Ingestions running at the same time share the expensive steps: their chunks go to the
embedder together, and their claim and their index write are one transaction for all of
them (per tenant). On a machine where the model takes the CPU, every statement a document
does not send is time the model gets back (bench/ingestion.py).

The claim takes a lease, renewed while the document is processed (`leases`); the store
and the failure record clear it, and write only while this process still holds it. A
document whose process died is taken over once its lease lapses (`recovery`).

Over 300 lines: the claim, prepare, embed and store steps and the batchers that share
their transactions are one flow; the SQL is in `repository`, the CPU work in `prepare`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from array import array
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.coalesce import Coalescer
from app.core.db import TENANT
from app.embeddings.base import Embedder, attachment_title, document_input
from app.embeddings.batching import CoalescingEmbedder
from app.embeddings.repository import recorded_model
from app.embeddings.space import EmbeddingMismatchError
from app.ingestion.chunking import Chunk
from app.ingestion.leases import LeaseKeeper
from app.ingestion.offload import PreparePool
from app.ingestion.prepare import PrepareError, PrepareOptions
from app.ingestion.repository import CLEARED_CLAIM, IngestionRepository, Kind, NewChunk

logger = logging.getLogger(__name__)

EMBED_BATCH = 64
MAX_ATTEMPTS = 3
CLAIMS_PER_TRANSACTION = 64
CHUNKS_PER_TRANSACTION = 2000


@dataclass(frozen=True)
class _Claim:
    tenant: uuid.UUID
    oid: uuid.UUID


_Claimed = tuple[bytes | None, str, str | None]
"""A claimed document's file, content type and title (an attachment's: its file name)."""


@dataclass
class _Indexed:
    tenant: uuid.UUID
    oid: uuid.UUID
    title: str
    chunks: list[Chunk]
    vectors: list[array[float]]
    values: dict[str, Any]
    """The document's columns once it is ready."""


@dataclass
class IngestionDeps:
    """What ingestion needs and its tuning: sessions, embedder, chunking, retries, leases."""

    sessionmaker: async_sessionmaker[AsyncSession]
    embedder: Embedder
    pii_anonymize: bool
    chunk_tokens: int = 400
    chunk_overlap: int = 60
    retry_delay: float = 1.0
    """Seconds before the second attempt after a transient failure; doubled each time."""
    lease_seconds: float = 60.0
    """How long a claim holds unless renewed (it is renewed every third of it)."""
    max_attempts: int = 3
    """Claims a document may take; past them, an interrupted one is not claimed again."""
    leases: LeaseKeeper = field(init=False)
    max_chars: int = 30_000_000
    max_pages: int = 2000
    cpu_seconds: float | None = None
    """CPU budget of one document in a worker process; None: unbounded."""
    preparer: PreparePool = field(default_factory=PreparePool)
    """Where extraction, sanitising and chunking run (worker processes in the API)."""
    batches: CoalescingEmbedder = field(init=False)
    """Chunks of documents ingested concurrently share the embedder's batches."""
    claims: dict[Kind, Coalescer[_Claim, _Claimed | None]] = field(init=False)
    stores: dict[Kind, Coalescer[_Indexed, str]] = field(init=False)
    """Documents ingested concurrently share their claim and index-write transactions; a
    batch that fails is retried document by document, so one bad document fails alone.
    One of each per kind: an attachment a user waits for never queues behind a bulk load."""

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        embedder: Embedder,
        preparer: PreparePool | None = None,
    ) -> IngestionDeps:
        """The pipeline as configured: one place for the API, the worker and the CLI."""
        return cls(
            sessionmaker=sessionmaker,
            embedder=embedder,
            pii_anonymize=settings.pii_anonymize,
            chunk_tokens=settings.chunk_tokens,
            chunk_overlap=settings.chunk_overlap_tokens,
            lease_seconds=settings.ingestion_lease_seconds,
            max_attempts=settings.ingestion_max_attempts,
            max_chars=settings.max_document_chars,
            max_pages=settings.max_pdf_pages,
            cpu_seconds=settings.ingest_document_cpu_seconds,
            preparer=preparer or PreparePool(),
        )

    def __post_init__(self) -> None:
        self.batches = CoalescingEmbedder(self.embedder, max_batch=EMBED_BATCH)
        self.leases = LeaseKeeper(lambda: self.sessionmaker, self.lease_seconds)
        kinds: tuple[Kind, ...] = ("kb", "attachment")
        self.claims = {
            kind: Coalescer(
                partial(_claim_together, self, kind),
                max_size=CLAIMS_PER_TRANSACTION,
                isolate_failures=True,
            )
            for kind in kinds
        }
        self.stores = {
            kind: Coalescer(
                partial(_store_together, self, kind),
                max_size=CHUNKS_PER_TRANSACTION,
                size=lambda indexed: max(1, len(indexed.chunks)),
                isolate_failures=True,
            )
            for kind in kinds
        }
        limit = self.embedder.max_input_tokens
        if limit is not None and limit < self.chunk_tokens:  # chunks the model reads whole
            self.chunk_tokens = limit
            self.chunk_overlap = min(self.chunk_overlap, limit // 4)

    def prepare_options(self, kind: Kind, content_type: str) -> PrepareOptions:
        """How to prepare one file of this kind (knowledge base or attachment)."""
        return PrepareOptions(
            content_type=content_type,
            anonymise=kind == "attachment" and self.pii_anonymize,
            chunk_tokens=self.chunk_tokens,
            chunk_overlap=self.chunk_overlap,
            max_chars=self.max_chars,
            max_pages=self.max_pages,
            keep_text=kind == "attachment",
            cpu_seconds=self.cpu_seconds,
        )


class _Failed(Exception):
    """A permanent failure: recorded, not retried."""


class _Deleted(Exception):
    """The document was deleted while it was being ingested."""


class _NotClaimed(Exception):
    """Ready, failed, gone, or in another process's hands: nothing for this job to do."""


SKIPPED = "skipped"
STOPPED = "stopped"


async def _progress(
    deps: IngestionDeps, kind: Kind, tenant: uuid.UUID, oid: uuid.UUID, value: float
) -> None:
    """Record progress, and stop here if the document was deleted or taken over meanwhile."""
    async with deps.sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant
        held = await IngestionRepository(db, kind, tenant).progress(oid, deps.leases.owner, value)
    if held == "gone":
        raise _Deleted
    if held == "taken":
        raise _NotClaimed


async def _fail(
    deps: IngestionDeps, kind: Kind, tenant: uuid.UUID, oid: uuid.UUID, error: str
) -> None:
    async with deps.sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant
        await IngestionRepository(db, kind, tenant).fail(oid, deps.leases.owner, error)


async def ingest(deps: IngestionDeps, kind: Kind, tenant: uuid.UUID, oid: uuid.UUID) -> str:
    """Run the pipeline with retries on transient errors; returns the final status, or
    `skipped` when the document was not this job's to ingest (already done, or held by
    another live process: a duplicate or late job is harmless)."""
    if not deps.leases.hold(kind, tenant, oid):
        return SKIPPED
    status = STOPPED  # cancelled: the process is stopping
    try:
        status = await _attempts(deps, kind, tenant, oid)
        return status
    finally:
        deps.leases.release(kind, tenant, oid, finished=status not in (SKIPPED, STOPPED))


async def stop(deps: IngestionDeps, wait_seconds: float = 5.0) -> int:
    """Shutdown: take no new document, cancel those under way, stop the worker processes
    (mid-document: they are not waited for) and hand every unfinished document back for
    another process to take at once. The number handed back."""
    deps.leases.begin_stop()
    handing = asyncio.ensure_future(deps.leases.hand_off(wait_seconds))
    await asyncio.to_thread(deps.preparer.terminate)
    return await handing


async def _attempts(deps: IngestionDeps, kind: Kind, tenant: uuid.UUID, oid: uuid.UUID) -> str:
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            await _ingest_once(deps, kind, tenant, oid)
            return "ready"
        except _Deleted:
            return "deleted"
        except _NotClaimed:
            return SKIPPED
        except _Failed as exc:
            await _fail(deps, kind, tenant, oid, str(exc))
            return "failed"
        except Exception as exc:  # transient (database, embedder endpoint): try again
            if deps.leases.stopping:  # the worker pool was stopped under it: handed back
                return STOPPED
            logger.warning(
                "ingestion attempt failed",
                extra={"kind": kind, "id": str(oid), "attempt": attempt},
                exc_info=True,
            )
            if attempt == MAX_ATTEMPTS:
                message = f"Ingestion failed after {attempt} attempts: {type(exc).__name__}"
                await _fail(deps, kind, tenant, oid, message)
                return "failed"
            await asyncio.sleep(deps.retry_delay * 2 ** (attempt - 1))
    return "failed"


async def _ingest_once(deps: IngestionDeps, kind: Kind, tenant: uuid.UUID, oid: uuid.UUID) -> None:
    claimed = await deps.claims[kind].submit(_Claim(tenant, oid))
    if claimed is None:
        raise _NotClaimed
    source, content_type, raw_title = claimed
    title = (raw_title or "") if kind == "kb" else attachment_title(raw_title)
    if source is None:
        raise _Failed("The file is missing.")
    try:  # CPU work for seconds on a large file: off the event loop
        prepared = await deps.preparer.prepare(
            source, deps.prepare_options(kind, content_type), turn=tenant
        )
    except PrepareError as exc:
        raise _Failed(str(exc)) from exc
    del source, claimed  # a large file's bytes are not kept while it is embedded
    chunks = prepared.chunks
    batched = len(chunks) > EMBED_BATCH  # progress is worth a write only for long documents
    if batched:
        await _progress(deps, kind, tenant, oid, 0.15)

    vectors: list[array[float]] = []
    for start in range(0, len(chunks), EMBED_BATCH):
        batch = chunks[start : start + EMBED_BATCH]
        # float32, as pgvector stores them: a 24 MB document's vectors in 26 MB, not 190
        inputs = [document_input(title, c.text) for c in batch]
        vectors += [array("f", v) for v in await deps.batches.embed(inputs)]
        done = start + len(batch)
        if batched and done < len(chunks):
            # Between batches: a document deleted meanwhile is not embedded to the end.
            await _progress(deps, kind, tenant, oid, round(0.15 + 0.8 * done / len(chunks), 3))

    values: dict[str, Any] = {
        "status": "ready",
        "progress": 1.0,
        "chunk_count": len(chunks),
        "ingestion": {
            "pages": prepared.pages,
            "chunks": len(chunks),
            "tokens": sum(c.tokens for c in chunks),
            "instructions_neutralised": prepared.injections,
            "pii_replaced": prepared.pii,
            "embedder": deps.embedder.name,
        },
        "error": None,
    }
    if kind == "attachment":
        values["text"] = prepared.text
    stored = await deps.stores[kind].submit(_Indexed(tenant, oid, title, chunks, vectors, values))
    if stored == _GONE:
        raise _Deleted  # deleted while it was being ingested
    if stored == _TAKEN_OVER:
        raise _NotClaimed  # this process's lease lapsed; the one that took it over stores it


Keyed = TypeVar("Keyed", _Claim, _Indexed)


def _by_tenant(items: list[Keyed]) -> dict[uuid.UUID, list[Keyed]]:
    groups: dict[uuid.UUID, list[Keyed]] = {}
    for item in items:
        groups.setdefault(item.tenant, []).append(item)
    return groups


async def _claim_together(
    deps: IngestionDeps, kind: Kind, claims: list[_Claim]
) -> list[_Claimed | None]:
    """Mark the documents `processing` under this process's lease: one transaction per
    tenant. None for one not claimed (see `IngestionRepository.claim`)."""
    found: dict[_Claim, _Claimed] = {}
    for tenant, group in _by_tenant(claims).items():
        if deps.leases.stopping:  # shutting down: not claimed, handed back with the rest
            break
        with deps.leases.claiming():
            async with deps.sessionmaker() as db, db.begin():
                db.info[TENANT] = tenant
                rows = await IngestionRepository(db, kind, tenant).claim(
                    [c.oid for c in group],
                    deps.leases.owner,
                    deps.lease_seconds,
                    deps.max_attempts,
                )
        deps.leases.claimed(kind, tenant, rows)
        found.update({_Claim(tenant, oid): row for oid, row in rows.items()})
    return [found.get(claim) for claim in claims]


_STORED, _GONE, _TAKEN_OVER = "stored", "gone", "taken over"


async def _store_together(deps: IngestionDeps, kind: Kind, items: list[_Indexed]) -> list[str]:
    """Index the documents' chunks, mark them ready and clear their claims: one transaction
    per tenant. Only documents this process still holds are written: not one deleted in
    the meantime (`gone`) nor one another process took over after this one's lease lapsed."""
    outcome: dict[tuple[uuid.UUID, uuid.UUID], str] = {}
    for tenant, group in _by_tenant(items).items():
        latest = {item.oid: item for item in group}  # the same document twice: the last wins
        async with deps.sessionmaker() as db, db.begin():
            db.info[TENANT] = tenant
            repository = IngestionRepository(db, kind, tenant)
            holders = await repository.lock_present(list(latest))
            mine = [oid for oid, owner in holders.items() if owner == deps.leases.owner]
            if mine:
                chunks = [chunk for oid in mine for chunk in _new_chunks(latest[oid])]
                await repository.replace_chunks(mine, chunks)
                # Checked after the write: a reindex switching models holds the chunk tables
                # until it commits, so the write above waited for it and this read (a new
                # snapshot) sees the model it recorded. Read before, it could let vectors of
                # the old model into the new space (same dimension: silently).
                _refuse_another_model(await recorded_model(db), deps.embedder.name)
                await repository.update_each(
                    [{"id": oid, **latest[oid].values, **CLEARED_CLAIM} for oid in mine]
                )
        for oid in latest:
            held = oid in holders
            outcome[(tenant, oid)] = _STORED if oid in mine else _TAKEN_OVER if held else _GONE
    return [outcome[(item.tenant, item.oid)] for item in items]


def _refuse_another_model(stored_model: str | None, embedder: str) -> None:
    """Raise (rolling the transaction back) when the stored vectors are another model's."""
    if stored_model not in (None, embedder):
        # `threadline reindex` switched to another model while this process ran.
        raise EmbeddingMismatchError(
            f"the stored vectors are now {stored_model}; this process embeds with "
            f"{embedder}: restart it with the new THREADLINE_EMBEDDER"
        )


def _new_chunks(indexed: _Indexed) -> list[NewChunk]:
    return [
        NewChunk(
            indexed.oid,
            chunk.ordinal,
            indexed.title,
            chunk.text,
            chunk.tokens,
            vector,
            chunk.location,
        )
        for chunk, vector in zip(indexed.chunks, indexed.vectors, strict=True)
    ]

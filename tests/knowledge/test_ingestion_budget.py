"""A document that costs too much CPU fails alone and quickly (issue 33 item 6): a 5 KB PDF
whose pages share one content stream of 300,000 text operations cost seconds of CPU a page
and held both workers for minutes while another tenant's document waited."""

from __future__ import annotations

import asyncio
import io
import time
import uuid
import zlib

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.core.db import TENANT
from app.embeddings.hashing import HashingEmbedder
from app.ingestion.extract import extract_text
from app.ingestion.offload import PreparePool
from app.ingestion.pipeline import IngestionDeps, ingest
from app.ingestion.uploads import from_bytes
from app.knowledge.service import add_document
from app.models import KbDocument
from tests.factories import make_tenant

pytestmark = pytest.mark.committed

DEADLINE = 60.0
"""Seconds within which both must be settled (measured: see docs/adr/0054)."""


def shared_stream_pdf(pages: int, operations: int, letter: bytes = b"a") -> bytes:
    """A PDF of `pages` pages that all draw one Flate-compressed content stream of
    `operations` text-showing operations (a few KB however many operations)."""
    ops = b"BT /F1 12 Tf " + (b"(" + letter + b") Tj 0 0 Td ") * operations + b" ET"
    stream = zlib.compress(ops, 9)
    kids = b" ".join(f"{5 + i} 0 R".encode() for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + kids
        + b"] /Count "
        + str(pages).encode()
        # inherited by every page: one resources object
        + b" /Resources << /Font << /F1 3 0 R >> >> >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length "
        + str(len(stream)).encode()
        + b" /Filter /FlateDecode >>\nstream\n"
        + stream
        + b"\nendstream",
    ] + [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>"
        for _ in range(pages)
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    out.writelines(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


async def _add(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: uuid.UUID, pdf: bytes, name: str
) -> uuid.UUID:
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant
        document, _ = await add_document(
            db,
            tenant,
            from_bytes(pdf, name),
            title=None,
            external_id=None,
            metadata={},
            created_by=None,
            enqueue=False,
        )
    return document.id


async def _status(
    sessionmaker: async_sessionmaker[AsyncSession], tenant: uuid.UUID, oid: uuid.UUID
) -> tuple[str, str | None]:
    async with sessionmaker() as db, db.begin():
        db.info[TENANT] = tenant
        row = (
            await db.execute(
                select(KbDocument.status, KbDocument.error).where(KbDocument.id == oid)
            )
        ).one()
        return row[0], row[1]


def test_pages_sharing_a_content_stream_are_read_once() -> None:
    text, pages = extract_text(shared_stream_pdf(15, 2000), "application/pdf")
    assert pages == 15
    assert text.count("a" * 2000) == 15  # every page still has its text
    started = time.process_time()
    extract_text(shared_stream_pdf(15, 100_000), "application/pdf")
    cost = time.process_time() - started
    one = time.process_time()
    extract_text(shared_stream_pdf(1, 100_000), "application/pdf")
    single = time.process_time() - one
    print(f"15 pages sharing a stream: {cost:.2f} s CPU; 1 page: {single:.2f} s")
    assert cost < 3 * single + 0.5  # about one page's work, not fifteen


async def test_a_pdf_over_its_cpu_budget_fails_while_another_tenants_document_is_ready(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> None:
    heavy, light = (await make_tenant(db)).id, (await make_tenant(db)).id
    await db.commit()
    bombs = [
        await _add(sessionmaker, heavy, shared_stream_pdf(15, 300_000, name), f"{name!r}.pdf")
        for name in (b"a", b"b")
    ]
    small = await _add(sessionmaker, light, shared_stream_pdf(1, 40, b"c"), "small.pdf")
    budgeted = settings.model_copy(update={"ingest_document_cpu_seconds": 1.0})
    preparer = PreparePool(2)
    deps = IngestionDeps.from_settings(budgeted, sessionmaker, HashingEmbedder(), preparer)
    started = time.monotonic()
    runs: list[asyncio.Future[str]] = []
    try:
        # The two bombs take both workers first; the other tenant's document comes after.
        runs += [asyncio.ensure_future(ingest(deps, "kb", heavy, oid)) for oid in bombs]
        await asyncio.sleep(0.5)
        other = asyncio.ensure_future(ingest(deps, "kb", light, small))
        runs.append(other)
        done, _ = await asyncio.wait(runs, timeout=DEADLINE)
        small_ready = time.monotonic() - started
        assert other in done, f"the other tenant's document still waits after {DEADLINE} s"
        assert other.result() == "ready"
        assert all(run in done for run in runs), f"a bomb still runs after {DEADLINE} s"
        took = time.monotonic() - started
    finally:
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
        await asyncio.to_thread(preparer.terminate)
    print(f"other tenant's document ready after {small_ready:.2f} s; all settled in {took:.2f} s")
    assert [run.result() for run in runs] == ["failed", "failed", "ready"]
    for oid in bombs:
        status, error = await _status(sessionmaker, heavy, oid)
        assert status == "failed"
        assert "CPU" in (error or ""), error
    assert (await _status(sessionmaker, light, small))[0] == "ready"

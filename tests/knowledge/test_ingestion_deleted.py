"""Deleting an attachment stops its ingestion between embedding batches (issue 33 item 9):
the loop used to find out only when it stored, after embedding every chunk."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.db import TENANT
from app.embeddings.hashing import HashingEmbedder
from app.ingestion.pipeline import EMBED_BATCH, IngestionDeps, ingest
from app.models import Attachment, AttachmentChunk
from tests.factories import make_tenant, make_user

pytestmark = pytest.mark.committed


class FirstBatchWaits(HashingEmbedder):
    """The hashing embedder, counting its calls; the first waits for `gate`."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.first = asyncio.Event()
        self.gate = asyncio.Event()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == 1:
            self.first.set()
            await self.gate.wait()
        return await super().embed(texts)


async def test_an_attachment_deleted_while_it_is_embedded_stops_at_the_next_batch(
    sessionmaker: async_sessionmaker[AsyncSession], db: AsyncSession
) -> None:
    tenant = await make_tenant(db)
    user = await make_user(db, tenant=tenant)
    await db.commit()
    # Short chunks: ten batches of the model's calls for one attachment.
    body = "\n\n".join(f"Paragraph {i} says something about topic {i}." for i in range(640))
    async with sessionmaker() as session, session.begin():
        session.info[TENANT] = tenant.id
        attachment = Attachment(
            tenant_id=tenant.id,
            user_id=user.id,
            content_hash="d" * 64,
            content_type="text/plain",
            filename="long.txt",
            source=body.encode(),
            status="pending",
        )
        session.add(attachment)
    oid: uuid.UUID = attachment.id
    embedder = FirstBatchWaits()
    deps = IngestionDeps(
        sessionmaker=sessionmaker,
        embedder=embedder,
        pii_anonymize=False,
        chunk_tokens=12,
        chunk_overlap=0,
        retry_delay=0.01,
    )
    run = asyncio.ensure_future(ingest(deps, "attachment", tenant.id, oid))
    await asyncio.wait_for(embedder.first.wait(), 30)
    async with sessionmaker() as session, session.begin():  # the user deletes it
        session.info[TENANT] = tenant.id
        await session.execute(delete(Attachment).where(Attachment.id == oid))
    embedder.gate.set()
    status = await asyncio.wait_for(run, 60)

    assert status == "deleted"
    batches = -(-640 // EMBED_BATCH)  # at least this many batches had it run to the end
    assert batches >= 10
    # The batch under way when it was deleted may finish; no further one starts.
    assert embedder.calls <= 2, f"{embedder.calls} of {batches} batches embedded"
    async with sessionmaker() as session, session.begin():
        session.info[TENANT] = tenant.id
        left = await session.scalars(
            select(AttachmentChunk.id).where(AttachmentChunk.attachment_id == oid)
        )
        assert list(left) == []

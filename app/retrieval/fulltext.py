"""Full-text retrieval (PostgreSQL `tsvector`) over ready knowledge-base and attachment chunks.

The hybrid retriever of the knowledge-base work adds the dense leg and fusion on top; this
is the lexical leg, and what the chat pipeline uses until embeddings exist.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import Float, cast, func, literal, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Attachment, AttachmentChunk, KbChunk, KbDocument
from app.retrieval.base import Passage


class FullTextRetriever:
    async def search(
        self,
        session: AsyncSession,
        tenant_id: uuid.UUID,
        query: str,
        *,
        attachment_ids: Sequence[uuid.UUID],
        k: int,
    ) -> list[Passage]:
        # OR of the query's terms: a question rarely shares every word with its answer.
        tsquery = func.to_tsquery(
            "english",
            func.array_to_string(func.tsvector_to_array(func.to_tsvector("english", query)), " | "),
        )
        kb = (
            select(
                KbChunk.id.label("id"),
                literal("kb").label("kind"),
                KbChunk.document_id.label("source_id"),
                KbDocument.title.label("title"),
                KbChunk.text.label("text"),
                cast(func.ts_rank_cd(KbChunk.tsv, tsquery, 32), Float).label("score"),
            )
            .join(
                KbDocument,
                (KbDocument.tenant_id == KbChunk.tenant_id)
                & (KbDocument.id == KbChunk.document_id),
            )
            .where(
                KbChunk.tenant_id == tenant_id,
                KbDocument.status == "ready",
                KbChunk.tsv.op("@@")(tsquery),
            )
        )
        parts = [kb]
        if attachment_ids:
            parts.append(
                select(
                    AttachmentChunk.id.label("id"),
                    literal("attachment").label("kind"),
                    AttachmentChunk.attachment_id.label("source_id"),
                    func.coalesce(Attachment.filename, "attachment").label("title"),
                    AttachmentChunk.text.label("text"),
                    cast(func.ts_rank_cd(AttachmentChunk.tsv, tsquery, 32), Float).label("score"),
                )
                .join(
                    Attachment,
                    (Attachment.tenant_id == AttachmentChunk.tenant_id)
                    & (Attachment.id == AttachmentChunk.attachment_id),
                )
                .where(
                    AttachmentChunk.tenant_id == tenant_id,
                    AttachmentChunk.attachment_id.in_(list(attachment_ids)),
                    Attachment.status == "ready",
                    AttachmentChunk.tsv.op("@@")(tsquery),
                )
            )
        combined = union_all(*parts).subquery()
        rows = await session.execute(
            select(combined).order_by(combined.c.score.desc(), combined.c.id).limit(k)
        )
        return [
            Passage(
                id=str(row.id),
                kind=row.kind,
                source_id=str(row.source_id),
                title=row.title,
                text=row.text,
                score=float(row.score),
            )
            for row in rows
        ]

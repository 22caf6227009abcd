"""Attachments, knowledge-base documents, their chunks (pgvector + full text) and session links.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from rls_ops import embedding_dim, enable_tenant_rls, grant_dml
from sqlalchemy.dialects import postgresql as pg

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = pg.UUID(as_uuid=True)
NOW = sa.text("clock_timestamp()")
STATUS_CHECK = "status IN ('pending', 'processing', 'ready', 'failed')"
TSV = "to_tsvector('english', text)"


def _document_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("filename", sa.Text),
        sa.Column("content_type", sa.Text),
        sa.Column("size_bytes", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("content_hash", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False, server_default="pending"),
        sa.Column("progress", sa.Float, nullable=False, server_default="0"),
        sa.Column("error", sa.Text),
        sa.Column("chunk_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
    ]


def _chunk_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("token_count", sa.Integer, nullable=False),
        sa.Column("embedding", Vector(embedding_dim())),
        sa.Column("tsv", pg.TSVECTOR, sa.Computed(TSV, persisted=True)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
    ]


def _search_indexes(table: str) -> None:
    # HNSW over cosine distance for the dense leg, GIN for the full-text leg.
    op.execute(
        f"CREATE INDEX ix_{table}_embedding_hnsw ON {table} "
        "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )
    op.create_index(f"ix_{table}_tsv", table, ["tsv"], postgresql_using="gin")


def upgrade() -> None:
    op.create_table(
        "attachments",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("id", UUID, nullable=False),
        sa.Column("user_id", UUID, nullable=False),
        sa.Column("text", sa.Text),
        *_document_columns(),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_attachments"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "user_id"],
            ["users.tenant_id", "users.id"],
            ondelete="CASCADE",
            name="fk_attachments_tenant_id_user_id_users",
        ),
        sa.CheckConstraint(STATUS_CHECK, name="ck_attachments_status"),
    )
    op.create_index(
        "ix_attachments_owner_hash", "attachments", ["tenant_id", "user_id", "content_hash"]
    )
    op.create_table(
        "attachment_chunks",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("id", UUID, nullable=False),
        sa.Column("attachment_id", UUID, nullable=False),
        *_chunk_columns(),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_attachment_chunks"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "attachment_id"],
            ["attachments.tenant_id", "attachments.id"],
            ondelete="CASCADE",
            name="fk_attachment_chunks_tenant_id_attachment_id_attachments",
        ),
    )
    op.create_index(
        "ix_attachment_chunks_attachment",
        "attachment_chunks",
        ["tenant_id", "attachment_id", "ordinal"],
    )
    _search_indexes("attachment_chunks")
    op.create_table(
        "session_attachments",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("session_id", UUID, nullable=False),
        sa.Column("attachment_id", UUID, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.PrimaryKeyConstraint(
            "tenant_id", "session_id", "attachment_id", name="pk_session_attachments"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "session_id"],
            ["chat_sessions.tenant_id", "chat_sessions.id"],
            ondelete="CASCADE",
            name="fk_session_attachments_tenant_id_session_id_chat_sessions",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "attachment_id"],
            ["attachments.tenant_id", "attachments.id"],
            ondelete="CASCADE",
            name="fk_session_attachments_tenant_id_attachment_id_attachments",
        ),
    )
    op.create_index(
        "ix_session_attachments_attachment",
        "session_attachments",
        ["tenant_id", "attachment_id"],
    )
    op.create_table(
        "kb_documents",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("id", UUID, nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("external_id", sa.Text),
        sa.Column("metadata", pg.JSONB, nullable=False, server_default="{}"),
        sa.Column("created_by", UUID),
        *_document_columns(),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_kb_documents"),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            ondelete="CASCADE",
            name="fk_kb_documents_tenant_id_tenants",
        ),
        sa.UniqueConstraint(
            "tenant_id", "content_hash", name="uq_kb_documents_tenant_id_content_hash"
        ),
        sa.CheckConstraint(STATUS_CHECK, name="ck_kb_documents_status"),
    )
    op.create_index("ix_kb_documents_external_id", "kb_documents", ["tenant_id", "external_id"])
    op.create_table(
        "kb_chunks",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("id", UUID, nullable=False),
        sa.Column("document_id", UUID, nullable=False),
        *_chunk_columns(),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_kb_chunks"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "document_id"],
            ["kb_documents.tenant_id", "kb_documents.id"],
            ondelete="CASCADE",
            name="fk_kb_chunks_tenant_id_document_id_kb_documents",
        ),
    )
    op.create_index("ix_kb_chunks_document", "kb_chunks", ["tenant_id", "document_id", "ordinal"])
    _search_indexes("kb_chunks")
    for table in (
        "attachments",
        "attachment_chunks",
        "session_attachments",
        "kb_documents",
        "kb_chunks",
    ):
        grant_dml(table)
        enable_tenant_rls(table)


def downgrade() -> None:
    for table in (
        "kb_chunks",
        "kb_documents",
        "session_attachments",
        "attachment_chunks",
        "attachments",
    ):
        op.drop_table(table)

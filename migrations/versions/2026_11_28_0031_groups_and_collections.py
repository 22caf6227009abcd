"""Groups, collections and collection-level row-level security (issue 30, ADR 0078).

1. `groups` and `group_members`: a tenant's groups of users.
2. `kb_collections` (visible to the whole tenant, or to the groups in
   `kb_collection_groups`) and `session_collections` (a conversation's chosen collections).
3. Every knowledge-base document belongs to one collection (`kb_documents.collection_id`);
   its chunks carry the same id (`kb_chunks.collection_id`, kept by triggers) so that the
   policy and the filtered HNSW scan read it from the chunk row itself. Existing documents
   move to one default collection per tenant, visible to everyone. A document inserted
   without a collection goes to its tenant's default collection (created when missing).
4. A RESTRICTIVE policy on `kb_documents` and `kb_chunks`: when the transaction-local
   `threadline.collections` holds a list of ids (`{...}`), only rows of those collections are
   visible or writable; when it is empty or unset the tenant policy alone applies (workers,
   maintenance). Every authenticated request and every chat turn sets the list.

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from rls_ops import enable_tenant_rls, grant_dml
from sqlalchemy.dialects import postgresql as pg

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UUID = pg.UUID(as_uuid=True)
NOW = sa.text("clock_timestamp()")
NEW_TABLES = ("groups", "group_members", "kb_collections", "kb_collection_groups")
SESSION_TABLE = "session_collections"
# A scalar subquery: PostgreSQL evaluates it once per statement (an InitPlan), not per row.
VISIBLE = (
    "((SELECT threadline_visible_collections()) IS NULL "
    "OR collection_id = ANY (CAST((SELECT threadline_visible_collections()) AS uuid[])))"
)


def _tenant_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["tenant_id"], ["tenants.id"], ondelete="CASCADE", name=f"fk_{table}_tenant_id_tenants"
    )


def _create_tables() -> None:
    op.create_table(
        "groups",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("id", UUID, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_groups"),
        _tenant_fk("groups"),
        sa.UniqueConstraint("tenant_id", "name", name="uq_groups_tenant_id_name"),
    )
    op.create_table(
        "group_members",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("group_id", UUID, nullable=False),
        sa.Column("user_id", UUID, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.PrimaryKeyConstraint("tenant_id", "group_id", "user_id", name="pk_group_members"),
        sa.ForeignKeyConstraint(
            ["tenant_id", "group_id"],
            ["groups.tenant_id", "groups.id"],
            ondelete="CASCADE",
            name="fk_group_members_tenant_id_group_id_groups",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "user_id"],
            ["users.tenant_id", "users.id"],
            ondelete="CASCADE",
            name="fk_group_members_tenant_id_user_id_users",
        ),
    )
    op.create_index("ix_group_members_user", "group_members", ["tenant_id", "user_id"])
    op.create_table(
        "kb_collections",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("id", UUID, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("visibility", sa.Text, nullable=False, server_default="tenant"),
        sa.Column("is_default", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("status", sa.Text, nullable=False, server_default="active"),
        sa.Column("deletion_progress", sa.Float, nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=NOW),
        sa.PrimaryKeyConstraint("tenant_id", "id", name="pk_kb_collections"),
        _tenant_fk("kb_collections"),
        sa.UniqueConstraint("tenant_id", "name", name="uq_kb_collections_tenant_id_name"),
        sa.CheckConstraint(
            "visibility IN ('tenant', 'groups')", name="ck_kb_collections_visibility"
        ),
        sa.CheckConstraint("status IN ('active', 'deleting')", name="ck_kb_collections_status"),
    )
    op.create_index(
        "ix_kb_collections_default",
        "kb_collections",
        ["tenant_id"],
        unique=True,
        postgresql_where=sa.text("is_default"),
    )
    op.create_table(
        "kb_collection_groups",
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("collection_id", UUID, nullable=False),
        sa.Column("group_id", UUID, nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant_id", "collection_id", "group_id", name="pk_kb_collection_groups"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "collection_id"],
            ["kb_collections.tenant_id", "kb_collections.id"],
            ondelete="CASCADE",
            name="fk_kb_collection_groups_tenant_id_collection_id_kb_collections",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "group_id"],
            ["groups.tenant_id", "groups.id"],
            ondelete="CASCADE",
            name="fk_kb_collection_groups_tenant_id_group_id_groups",
        ),
    )
    op.create_index(
        "ix_kb_collection_groups_group", "kb_collection_groups", ["tenant_id", "group_id"]
    )
    op.create_table(
        SESSION_TABLE,
        sa.Column("tenant_id", UUID, nullable=False),
        sa.Column("session_id", UUID, nullable=False),
        sa.Column("collection_id", UUID, nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant_id", "session_id", "collection_id", name="pk_session_collections"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "session_id"],
            ["chat_sessions.tenant_id", "chat_sessions.id"],
            ondelete="CASCADE",
            name="fk_session_collections_tenant_id_session_id_chat_sessions",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "collection_id"],
            ["kb_collections.tenant_id", "kb_collections.id"],
            ondelete="CASCADE",
            name="fk_session_collections_tenant_id_collection_id_kb_collections",
        ),
    )
    op.create_index(
        "ix_session_collections_collection", SESSION_TABLE, ["tenant_id", "collection_id"]
    )
    for table in (*NEW_TABLES, SESSION_TABLE):
        grant_dml(table)
        enable_tenant_rls(table)


def _functions_and_triggers() -> None:
    op.execute(
        """
        CREATE FUNCTION threadline_visible_collections() RETURNS uuid[]
        LANGUAGE sql STABLE PARALLEL SAFE
        AS $$ SELECT NULLIF(current_setting('threadline.collections', true), '')::uuid[] $$
        """
    )
    # The default collection is created the first time a tenant's document needs it, so a
    # new tenant (or one made by an older code path) never lacks it.
    op.execute(
        """
        CREATE FUNCTION threadline_document_collection() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.collection_id IS NULL THEN
            SELECT id INTO NEW.collection_id FROM kb_collections
            WHERE tenant_id = NEW.tenant_id AND is_default;
            IF NEW.collection_id IS NULL THEN
              INSERT INTO kb_collections (tenant_id, id, name, is_default)
              VALUES (NEW.tenant_id, gen_random_uuid(), 'General', true)
              ON CONFLICT DO NOTHING;
              SELECT id INTO NEW.collection_id FROM kb_collections
              WHERE tenant_id = NEW.tenant_id AND is_default;
            END IF;
          END IF;
          RETURN NEW;
        END $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION threadline_chunk_collection() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
          SELECT collection_id INTO NEW.collection_id FROM kb_documents
          WHERE tenant_id = NEW.tenant_id AND id = NEW.document_id;
          RETURN NEW;
        END $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION threadline_move_chunks() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
          UPDATE kb_chunks SET collection_id = NEW.collection_id
          WHERE tenant_id = NEW.tenant_id AND document_id = NEW.id;
          RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER kb_documents_collection BEFORE INSERT ON kb_documents "
        "FOR EACH ROW EXECUTE FUNCTION threadline_document_collection()"
    )
    op.execute(
        "CREATE TRIGGER kb_chunks_collection BEFORE INSERT ON kb_chunks "
        "FOR EACH ROW EXECUTE FUNCTION threadline_chunk_collection()"
    )
    op.execute(
        "CREATE TRIGGER kb_documents_move AFTER UPDATE OF collection_id ON kb_documents "
        "FOR EACH ROW WHEN (OLD.collection_id IS DISTINCT FROM NEW.collection_id) "
        "EXECUTE FUNCTION threadline_move_chunks()"
    )


def upgrade() -> None:
    _create_tables()
    op.add_column("kb_documents", sa.Column("collection_id", UUID, nullable=True))
    op.add_column("kb_chunks", sa.Column("collection_id", UUID, nullable=True))
    # One default collection per tenant, visible to all; existing documents move there.
    op.execute(
        "INSERT INTO kb_collections (tenant_id, id, name, is_default) "
        "SELECT id, gen_random_uuid(), 'General', true FROM tenants ON CONFLICT DO NOTHING"
    )
    op.execute(
        "UPDATE kb_documents d SET collection_id = c.id FROM kb_collections c "
        "WHERE c.tenant_id = d.tenant_id AND c.is_default"
    )
    op.execute(
        "UPDATE kb_chunks k SET collection_id = d.collection_id FROM kb_documents d "
        "WHERE d.tenant_id = k.tenant_id AND d.id = k.document_id"
    )
    op.alter_column("kb_documents", "collection_id", nullable=False)
    op.alter_column("kb_chunks", "collection_id", nullable=False)
    op.create_foreign_key(
        "fk_kb_documents_tenant_id_collection_id_kb_collections",
        "kb_documents",
        "kb_collections",
        ["tenant_id", "collection_id"],
        ["tenant_id", "id"],
        ondelete="CASCADE",
    )
    op.create_index("ix_kb_documents_collection", "kb_documents", ["tenant_id", "collection_id"])
    op.create_index("ix_kb_chunks_collection", "kb_chunks", ["tenant_id", "collection_id"])
    _functions_and_triggers()
    for table in ("kb_documents", "kb_chunks"):
        op.execute(
            f"CREATE POLICY collection_visibility ON {table} AS RESTRICTIVE "
            f"USING {VISIBLE} WITH CHECK {VISIBLE}"
        )


def downgrade() -> None:
    for table in ("kb_documents", "kb_chunks"):
        op.execute(f"DROP POLICY IF EXISTS collection_visibility ON {table}")
    op.execute("DROP TRIGGER IF EXISTS kb_documents_move ON kb_documents")
    op.execute("DROP TRIGGER IF EXISTS kb_chunks_collection ON kb_chunks")
    op.execute("DROP TRIGGER IF EXISTS kb_documents_collection ON kb_documents")
    op.execute("DROP FUNCTION IF EXISTS threadline_move_chunks()")
    op.execute("DROP FUNCTION IF EXISTS threadline_chunk_collection()")
    op.execute("DROP FUNCTION IF EXISTS threadline_document_collection()")
    op.execute("DROP FUNCTION IF EXISTS threadline_visible_collections()")
    op.drop_index("ix_kb_chunks_collection", table_name="kb_chunks")
    op.drop_index("ix_kb_documents_collection", table_name="kb_documents")
    op.drop_constraint(
        "fk_kb_documents_tenant_id_collection_id_kb_collections", "kb_documents", type_="foreignkey"
    )
    op.drop_column("kb_chunks", "collection_id")
    op.drop_column("kb_documents", "collection_id")
    for table in (SESSION_TABLE, *reversed(NEW_TABLES)):
        op.drop_table(table)

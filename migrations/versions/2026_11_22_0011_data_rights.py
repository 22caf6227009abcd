"""Data rights: tenant-tagged checkpoints (orphan sweep, retention), the maintenance door.

1. The checkpoint tables get a `tenant_id`, filled by default from the transaction's tenant
   (the saver sets it on every use), and a second policy that lets a tenant see and delete
   its own rows even when their session is gone. A checkpoint write racing a session's
   delete can leave such a thread behind; without the tag no role but a superuser could ever
   find it again. Inserts must carry the current tenant (WITH CHECK), so no tenant can plant
   rows on another's thread.
2. `tenants` opens one read-only door, `threadline.maintenance = 'on'` (transaction-local),
   for the scheduled sweep to list tenants and their retention policy; everything it then
   purges is done inside each tenant's own scope.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-22
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

THREAD_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
THREAD_OF_TENANT = (
    "EXISTS (SELECT 1 FROM chat_sessions s "
    "WHERE s.tenant_id = threadline_current_tenant() AND s.id = CAST(thread_id AS uuid))"
)
TAGGED = "tenant_id = threadline_current_tenant()"


def upgrade() -> None:
    for table in THREAD_TABLES:
        op.execute(
            f"ALTER TABLE {table} ADD COLUMN tenant_id uuid DEFAULT threadline_current_tenant()"
        )
        # Existing rows: tagged from their session (seen only by an owner that passes RLS;
        # untagged rows stay reachable through their session, as before).
        op.execute(
            f"UPDATE {table} t SET tenant_id = s.tenant_id FROM chat_sessions s "
            "WHERE s.id = CAST(t.thread_id AS uuid)"
        )
        op.execute(
            f"ALTER POLICY session_of_tenant ON {table} "
            f"USING ({THREAD_OF_TENANT}) WITH CHECK ({THREAD_OF_TENANT} AND {TAGGED})"
        )
        for command in ("SELECT", "DELETE"):
            op.execute(
                f"CREATE POLICY tagged_{command.lower()} ON {table} FOR {command} USING ({TAGGED})"
            )
    op.execute("CREATE INDEX checkpoints_tenant_idx ON checkpoints (tenant_id)")
    op.execute(
        "CREATE POLICY tenants_maintenance ON tenants FOR SELECT "
        "USING (current_setting('threadline.maintenance', true) = 'on')"
    )


def downgrade() -> None:
    op.execute("DROP POLICY IF EXISTS tenants_maintenance ON tenants")
    op.execute("DROP INDEX IF EXISTS checkpoints_tenant_idx")
    for table in THREAD_TABLES:
        for command in ("select", "delete"):
            op.execute(f"DROP POLICY IF EXISTS tagged_{command} ON {table}")
        op.execute(
            f"ALTER POLICY session_of_tenant ON {table} "
            f"USING ({THREAD_OF_TENANT}) WITH CHECK ({THREAD_OF_TENANT})"
        )
        op.execute(f"ALTER TABLE {table} DROP COLUMN tenant_id")

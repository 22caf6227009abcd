"""LangGraph's checkpoint tables (langgraph-checkpoint-postgres schema version 9), under RLS.

The statements are frozen copies of `langgraph.checkpoint.postgres.base.MIGRATIONS` 0-9
(`CONCURRENTLY` dropped: the tables are new and this runs in a transaction), recorded in
`checkpoint_migrations` so the saver's own `setup()` finds nothing left to do. A later library
release that adds a migration gets a new revision here; a test compares the frozen copy with
the installed library, and start-up refuses a schema at another version.

The checkpoint tables have no tenant column: their `thread_id` is a chat session id. Their
policy admits a row only when its thread is a session of the current tenant, so checkpoints get
the same second wall as every tenant-owned table.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-21
"""

from collections.abc import Sequence

from alembic import op
from rls_ops import grant_dml

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHECKPOINTER_MIGRATIONS = [
    """CREATE TABLE IF NOT EXISTS checkpoint_migrations (
    v INTEGER PRIMARY KEY
);""",
    """CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint JSONB NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);""",
    """CREATE TABLE IF NOT EXISTS checkpoint_blobs (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    type TEXT NOT NULL,
    blob BYTEA,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
);""",
    """CREATE TABLE IF NOT EXISTS checkpoint_writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    blob BYTEA NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);""",
    "ALTER TABLE checkpoint_blobs ALTER COLUMN blob DROP not null;",
    "SELECT 1;",
    "CREATE INDEX IF NOT EXISTS checkpoints_thread_id_idx ON checkpoints(thread_id);",
    "CREATE INDEX IF NOT EXISTS checkpoint_blobs_thread_id_idx ON checkpoint_blobs(thread_id);",
    "CREATE INDEX IF NOT EXISTS checkpoint_writes_thread_id_idx ON checkpoint_writes(thread_id);",
    "ALTER TABLE checkpoint_writes ADD COLUMN IF NOT EXISTS task_path TEXT NOT NULL DEFAULT '';",
]
THREAD_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
CHECKPOINT_TABLES = (*THREAD_TABLES, "checkpoint_migrations")
# thread_id is always a session id (a UUID) in Threadline; a malformed one fails loudly.
THREAD_OF_TENANT = (
    "EXISTS (SELECT 1 FROM chat_sessions s "
    "WHERE s.tenant_id = threadline_current_tenant() AND s.id = CAST(thread_id AS uuid))"
)


def upgrade() -> None:
    for version, statement in enumerate(CHECKPOINTER_MIGRATIONS):
        op.execute(statement)
        op.execute(f"INSERT INTO checkpoint_migrations (v) VALUES ({version})")
    for table in THREAD_TABLES:
        grant_dml(table)
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY session_of_tenant ON {table} "
            f"USING ({THREAD_OF_TENANT}) WITH CHECK ({THREAD_OF_TENANT})"
        )
    grant_dml("checkpoint_migrations", "SELECT")


def downgrade() -> None:
    for table in CHECKPOINT_TABLES:
        op.execute(f"DROP TABLE IF EXISTS {table}")

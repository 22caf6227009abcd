"""Running turns have an owner with a lease.

1. `query_history.lease_owner` (the API process running the turn) and `lease_expires_at`
   (renewed by that process while the turn runs). A pending turn whose lease has expired is an
   orphan: its process died, and any process may finish it `incomplete`.
2. A partial index over pending turns by lease expiry, for the sweep that finds orphans.
3. One read-only door for that sweep: with `threadline.maintenance = 'on'` (transaction-local,
   as for `tenants`, migration 0011) pending turns of every tenant are visible. What the sweep
   then writes is written inside each turn's own tenant scope.
4. Turns already pending get a lease of five minutes: a process of the previous release may
   still be running them; after that they are swept.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("query_history", sa.Column("lease_owner", sa.Text(), nullable=True))
    op.add_column(
        "query_history", sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_index(
        "ix_query_history_pending_lease",
        "query_history",
        ["lease_expires_at"],
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.execute(
        "CREATE POLICY pending_turns_maintenance ON query_history FOR SELECT "
        "USING (current_setting('threadline.maintenance', true) = 'on' AND status = 'pending')"
    )
    op.execute(
        "UPDATE query_history SET lease_expires_at = now() + interval '5 minutes' "
        "WHERE status = 'pending'"
    )


def downgrade() -> None:
    op.execute("DROP POLICY IF EXISTS pending_turns_maintenance ON query_history")
    op.drop_index("ix_query_history_pending_lease", table_name="query_history")
    op.drop_column("query_history", "lease_expires_at")
    op.drop_column("query_history", "lease_owner")

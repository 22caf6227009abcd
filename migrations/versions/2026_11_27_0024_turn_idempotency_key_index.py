"""A turn is found by its Idempotency-Key when Redis forgot the key (ADR 0069).

`query_history.idempotency_key` holds the Redis key of the turn's claim and the request's
fingerprint, one per line. A won claim looks for this user's turn whose key (the first line)
is the claim's: an expression index on `(tenant_id, user_id, split_part(idempotency_key, chr(10),
1))`, partial on rows that have a key, makes that an equality look-up.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_query_history_idempotency_key",
        "query_history",
        ["tenant_id", "user_id", sa.text("split_part(idempotency_key, chr(10), 1)")],
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_query_history_idempotency_key", table_name="query_history")

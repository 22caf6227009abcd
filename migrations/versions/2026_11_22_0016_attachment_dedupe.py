"""One attachment per (tenant, user, content hash).

The upload path looked for an existing copy, then inserted: concurrent identical uploads all
found none (20 of them stored 3 rows). A unique constraint, as the knowledge base has, lets
the upload insert with ON CONFLICT. The copies already stored go first: the oldest of each
group stays, the sessions and turns that named a younger copy name the oldest instead, and the
younger copies go with their chunks.

Downgrade restores the plain index; the removed copies do not come back (they held nothing
the oldest does not).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-22
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COPIES = """
CREATE TEMPORARY TABLE attachment_copies AS
SELECT tenant_id, id, keeper FROM (
  SELECT tenant_id, id,
         first_value(id) OVER (
           -- a ready copy is kept before an older failed one (a re-upload of a failed file
           -- used to leave both)
           PARTITION BY tenant_id, user_id, content_hash
           ORDER BY (status = 'ready') DESC, created_at, id
         ) AS keeper
  FROM attachments
) ranked
WHERE id <> keeper
"""

_RELINK_SESSIONS = """
INSERT INTO session_attachments (tenant_id, session_id, attachment_id, created_at)
SELECT link.tenant_id, link.session_id, copy.keeper, min(link.created_at)
FROM session_attachments link
JOIN attachment_copies copy
  ON copy.tenant_id = link.tenant_id AND copy.id = link.attachment_id
GROUP BY link.tenant_id, link.session_id, copy.keeper
ON CONFLICT (tenant_id, session_id, attachment_id) DO NOTHING
"""

# A turn's record of what it was asked with names the copy that stays, in the same order.
_RELINK_TURNS = """
UPDATE query_history turn
SET attachment_ids = ARRAY(
  SELECT coalesce(copy.keeper, named.id)
  FROM unnest(turn.attachment_ids) WITH ORDINALITY AS named(id, position)
  LEFT JOIN attachment_copies copy ON copy.tenant_id = turn.tenant_id AND copy.id = named.id
  ORDER BY named.position
)
WHERE EXISTS (
  SELECT 1 FROM attachment_copies copy
  WHERE copy.tenant_id = turn.tenant_id AND copy.id = ANY (turn.attachment_ids)
)
"""

# Chunks and the copies' own session links go by ON DELETE CASCADE.
_REMOVE_COPIES = """
DELETE FROM attachments a
USING attachment_copies copy
WHERE a.tenant_id = copy.tenant_id AND a.id = copy.id
"""


# Row-level security is forced on these tables, even for their owner: lifted for the
# clean-up (in this transaction only), so an owner that is no superuser sees every tenant.
_TABLES = ("attachments", "session_attachments", "query_history")


def upgrade() -> None:
    # No upload may add a copy between the clean-up and the constraint.
    op.execute("LOCK TABLE attachments IN SHARE ROW EXCLUSIVE MODE")
    for table in _TABLES:
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    op.execute(_COPIES)
    op.execute(_RELINK_SESSIONS)
    op.execute(_RELINK_TURNS)
    op.execute(_REMOVE_COPIES)
    op.execute("DROP TABLE attachment_copies")
    for table in _TABLES:
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    op.drop_index("ix_attachments_owner_hash", table_name="attachments")
    op.create_unique_constraint(
        "uq_attachments_tenant_id_user_id_content_hash",
        "attachments",
        ["tenant_id", "user_id", "content_hash"],
    )


def downgrade() -> None:
    op.drop_constraint(
        "uq_attachments_tenant_id_user_id_content_hash", "attachments", type_="unique"
    )
    op.create_index(
        "ix_attachments_owner_hash", "attachments", ["tenant_id", "user_id", "content_hash"]
    )

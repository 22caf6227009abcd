"""Every chunk knows where it is in its document (issue 29, ADR 0074).

`kb_chunks.location` and `attachment_chunks.location`: JSONB, `{"page": 12, "page_end":
13, "section": "3 Refunds > 3.2 Annual plans"}` and the like (only the keys that apply).
Nullable without a default, so adding it rewrites no row; a chunk indexed before it reads
as having no location. Down drops the columns (the locations are lost, nothing else).

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("kb_chunks", "attachment_chunks")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("location", JSONB, nullable=True))


def downgrade() -> None:
    for table in TABLES:
        op.drop_column(table, "location")

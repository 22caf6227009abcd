"""Users can be disabled, and their last sign-in is kept (the admin's user list).

`users.disabled_at`: set while an admin has disabled the account; its tokens, refreshes and
API keys are refused while it is set. `users.last_login_at`: the time of the last password
login.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("users", sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("users", sa.Column("last_login_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("users", "last_login_at")
    op.drop_column("users", "disabled_at")

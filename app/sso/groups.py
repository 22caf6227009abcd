"""The hook that receives a user's groups from the identity provider at each SSO sign-in.

The groups themselves belong to another package; this one only says what it hands over. The
application sets an implementation on `app.state.sso_group_sync` (see `group_sync`); without
one, groups are read and dropped.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

STATE_ATTRIBUTE = "sso_group_sync"


class GroupSync(Protocol):
    """Make a user's Threadline groups the ones named by the identity provider."""

    async def set_user_groups(
        self, db: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID, names: Sequence[str]
    ) -> None:
        """Called inside the sign-in's transaction (scoped to `tenant_id`), after the user
        exists and before the session starts: a failure here fails the sign-in and stores
        nothing. `names` is the claim's value as given (de-duplicated, order kept), possibly
        empty: the user is then in no group."""
        ...


class NoGroupSync:
    """The default: groups are not mapped."""

    async def set_user_groups(
        self, db: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID, names: Sequence[str]
    ) -> None:
        """Do nothing."""


def group_sync(app: FastAPI) -> GroupSync:
    """The application's group hook, or the no-op."""
    hook: GroupSync | None = getattr(app.state, STATE_ATTRIBUTE, None)
    return hook if hook is not None else NoGroupSync()

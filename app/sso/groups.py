"""The hook that receives a user's groups from the identity provider at each SSO sign-in.

The groups themselves belong to `app.groups`; this module only says what it hands over. By
default the user is made a member of exactly the tenant's existing groups the provider names
(`DirectoryGroupSync`): a name no group has is ignored, so an admin decides which of the
provider's groups mean something here by creating a group of the same name. Another
implementation may be set on `app.state.sso_group_sync` (see `group_sync`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.groups.service import set_user_groups_by_name

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


class DirectoryGroupSync:
    """The default: the user's memberships follow the provider's names of existing groups
    (the change audited by `app.groups`)."""

    async def set_user_groups(
        self, db: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID, names: Sequence[str]
    ) -> None:
        """Make the user a member of exactly the named groups that exist."""
        await set_user_groups_by_name(db, tenant_id, user_id, names)


def group_sync(app: FastAPI) -> GroupSync:
    """The application's group hook: the one set on its state, or `DirectoryGroupSync`."""
    hook: GroupSync | None = getattr(app.state, STATE_ATTRIBUTE, None)
    return hook if hook is not None else DirectoryGroupSync()

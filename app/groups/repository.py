"""Every statement on `groups` and `group_members`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert

from app.core.repository import TenantRepository
from app.models import Group, GroupMember, User


class GroupRepository(TenantRepository[Group]):
    """A tenant's groups and their members."""

    model = Group

    async def all_with_counts(self) -> list[tuple[Group, int]]:
        """Every group of the tenant by name, with its number of members."""
        members = (
            select(func.count())
            .where(GroupMember.tenant_id == Group.tenant_id, GroupMember.group_id == Group.id)
            .scalar_subquery()
        )
        rows = await self.db.execute(
            select(Group, members).where(Group.tenant_id == self.tenant_id).order_by(Group.name)
        )
        return [(group, int(count)) for group, count in rows.all()]

    async def by_name(self, name: str) -> Group | None:
        """The tenant's group of this name, or None."""
        return await self.db.scalar(self.scoped().where(Group.name == name))

    async def by_names(self, names: Sequence[str]) -> list[Group]:
        """The tenant's groups of these names (those that exist)."""
        return list(await self.db.scalars(self.scoped().where(Group.name.in_(list(names)))))

    async def by_ids(self, ids: Sequence[uuid.UUID]) -> list[Group]:
        """The tenant's groups of these ids (those that exist)."""
        return list(await self.db.scalars(self.scoped().where(Group.id.in_(list(ids)))))

    async def members(self, group_id: uuid.UUID) -> list[User]:
        """A group's members by e-mail."""
        statement = (
            select(User)
            .join(
                GroupMember,
                (GroupMember.tenant_id == User.tenant_id) & (GroupMember.user_id == User.id),
            )
            .where(GroupMember.tenant_id == self.tenant_id, GroupMember.group_id == group_id)
            .order_by(User.email)
        )
        return list(await self.db.scalars(statement))

    async def add_member(self, group_id: uuid.UUID, user_id: uuid.UUID) -> bool:
        """Add a member; False if they already were one."""
        statement = (
            insert(GroupMember)
            .values(tenant_id=self.tenant_id, group_id=group_id, user_id=user_id)
            .on_conflict_do_nothing()
            .returning(GroupMember.user_id)
        )
        return (await self.db.execute(statement)).first() is not None

    async def remove_member(self, group_id: uuid.UUID, user_id: uuid.UUID) -> bool:
        """Remove a member; False if they were not one."""
        statement = (
            delete(GroupMember)
            .where(
                GroupMember.tenant_id == self.tenant_id,
                GroupMember.group_id == group_id,
                GroupMember.user_id == user_id,
            )
            .returning(GroupMember.user_id)
        )
        return (await self.db.execute(statement)).first() is not None

    async def groups_of(self, user_id: uuid.UUID) -> list[Group]:
        """The groups a user is in, by name."""
        statement = (
            self.scoped()
            .join(
                GroupMember,
                (GroupMember.tenant_id == Group.tenant_id) & (GroupMember.group_id == Group.id),
            )
            .where(GroupMember.user_id == user_id)
            .order_by(Group.name)
        )
        return list(await self.db.scalars(statement))

    async def remove_user(self, user_id: uuid.UUID) -> list[uuid.UUID]:
        """Remove a user from every group; the groups they were in."""
        statement = (
            delete(GroupMember)
            .where(GroupMember.tenant_id == self.tenant_id, GroupMember.user_id == user_id)
            .returning(GroupMember.group_id)
        )
        return list((await self.db.execute(statement)).scalars().all())

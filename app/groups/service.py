"""Groups: an admin creates, renames and deletes them and manages their members; single
sign-on sets a user's groups by name. Never commits; every change is in the audit log with
who did it, what, and the state before and after (issue 30, item 8)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.repository import AuditLogRepository
from app.auth.principal import Principal
from app.auth.repository import UserRepository
from app.core.errors import Conflict, NotFound
from app.groups.repository import GroupRepository
from app.groups.schemas import (
    GroupDetail,
    GroupIn,
    GroupList,
    GroupOut,
    MemberById,
    MemberIn,
    MemberOut,
)
from app.models import AuditLog, Group, User


async def audit(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    actor_id: uuid.UUID,
    action: str,
    resource: str,
    *,
    target_user_id: uuid.UUID | None = None,
    before: Any = None,
    after: Any = None,
) -> None:
    """Record a change of groups, memberships or collections: who, what, before, after."""
    await AuditLogRepository(db, tenant_id).add(
        AuditLog(
            tenant_id=tenant_id,
            actor_user_id=actor_id,
            action=action,
            target_user_id=target_user_id,
            resource=resource,
            details={"before": before, "after": after},
        )
    )


async def _group(db: AsyncSession, admin: Principal, group_id: uuid.UUID) -> Group:
    group = await GroupRepository(db, admin.tenant_id).get(group_id)
    if group is None:
        raise NotFound("No such group.", code="group_not_found")
    return group


async def list_groups(db: AsyncSession, admin: Principal) -> GroupList:
    """Every group of the admin's tenant with its member count."""
    rows = await GroupRepository(db, admin.tenant_id).all_with_counts()
    return GroupList(
        items=[GroupOut(id=g.id, name=g.name, members=n, created_at=g.created_at) for g, n in rows]
    )


async def get_group(db: AsyncSession, admin: Principal, group_id: uuid.UUID) -> GroupDetail:
    """One group with its members (404 for another tenant's)."""
    group = await _group(db, admin, group_id)
    members = await GroupRepository(db, admin.tenant_id).members(group_id)
    return GroupDetail(
        id=group.id,
        name=group.name,
        members=len(members),
        created_at=group.created_at,
        member_list=[MemberOut(user_id=u.id, email=u.email) for u in members],
    )


async def create_group(db: AsyncSession, admin: Principal, body: GroupIn) -> GroupDetail:
    """A new group (409 when the name is taken)."""
    groups = GroupRepository(db, admin.tenant_id)
    if await groups.by_name(body.name) is not None:
        raise Conflict("A group of this name exists.", code="group_exists")
    group = groups.add(Group(tenant_id=admin.tenant_id, name=body.name))
    await db.flush()
    await db.refresh(group)
    await audit(
        db, admin.tenant_id, admin.user_id, "group.create", f"group:{group.id}", after=body.name
    )
    return GroupDetail(
        id=group.id, name=group.name, members=0, created_at=group.created_at, member_list=[]
    )


async def rename_group(
    db: AsyncSession, admin: Principal, group_id: uuid.UUID, body: GroupIn
) -> GroupDetail:
    """Rename a group (409 when the name is another group's)."""
    group = await _group(db, admin, group_id)
    other = await GroupRepository(db, admin.tenant_id).by_name(body.name)
    if other is not None and other.id != group.id:
        raise Conflict("A group of this name exists.", code="group_exists")
    before, group.name = group.name, body.name
    await db.flush()
    await audit(
        db,
        admin.tenant_id,
        admin.user_id,
        "group.rename",
        f"group:{group.id}",
        before=before,
        after=body.name,
    )
    return await get_group(db, admin, group_id)


async def delete_group(db: AsyncSession, admin: Principal, group_id: uuid.UUID) -> None:
    """Delete a group: its members lose what it gave them at their next request."""
    group = await _group(db, admin, group_id)
    members = await GroupRepository(db, admin.tenant_id).members(group_id)
    await GroupRepository(db, admin.tenant_id).delete(group)
    await db.flush()
    await audit(
        db,
        admin.tenant_id,
        admin.user_id,
        "group.delete",
        f"group:{group.id}",
        before={"name": group.name, "members": [str(u.id) for u in members]},
    )


async def _user(db: AsyncSession, admin: Principal, body: MemberIn) -> User:
    users = UserRepository(db, admin.tenant_id)
    if isinstance(body, MemberById):
        user = await users.get(body.user_id)
    else:
        user = await users.by_email(body.email)
    if user is None:
        raise NotFound("No such user.", code="user_not_found")
    return user


async def add_member(
    db: AsyncSession, admin: Principal, group_id: uuid.UUID, body: MemberIn
) -> tuple[GroupDetail, bool]:
    """Add a user (by id or e-mail) to a group; whether they were newly added."""
    group = await _group(db, admin, group_id)
    user = await _user(db, admin, body)
    added = await GroupRepository(db, admin.tenant_id).add_member(group.id, user.id)
    if added:
        await audit(
            db,
            admin.tenant_id,
            admin.user_id,
            "group.member_add",
            f"group:{group.id}",
            target_user_id=user.id,
            before=False,
            after=True,
        )
    return await get_group(db, admin, group_id), added


async def remove_member(
    db: AsyncSession, admin: Principal, group_id: uuid.UUID, user_id: uuid.UUID
) -> None:
    """Remove a user from a group (404 if they were not in it); applies to their next request."""
    group = await _group(db, admin, group_id)
    if not await GroupRepository(db, admin.tenant_id).remove_member(group.id, user_id):
        raise NotFound("The user is not a member of this group.", code="member_not_found")
    await audit(
        db,
        admin.tenant_id,
        admin.user_id,
        "group.member_remove",
        f"group:{group.id}",
        target_user_id=user_id,
        before=True,
        after=False,
    )


async def set_user_groups_by_name(
    db: AsyncSession,
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
    names: Sequence[str],
    *,
    actor_id: uuid.UUID | None = None,
    create_missing: bool = False,
) -> list[str]:
    """Make the user a member of exactly the named groups (single sign-on maps a claim here
    on every sign-in). Names of no group are ignored unless `create_missing`. The change, if
    any, is audited (actor: `actor_id`, else the user). Returns the user's groups' names."""
    groups = GroupRepository(db, tenant_id)
    wanted = {" ".join(n.split()) for n in names if n and n.strip()}
    found = {g.name: g for g in await groups.by_names(sorted(wanted))}
    if create_missing:
        for name in sorted(wanted - set(found)):
            found[name] = groups.add(Group(tenant_id=tenant_id, name=name))
        await db.flush()
    current = {g.name: g for g in await groups.groups_of(user_id)}
    for name in set(current) - set(found):
        await groups.remove_member(current[name].id, user_id)
    for name in set(found) - set(current):
        await groups.add_member(found[name].id, user_id)
    before, after = sorted(current), sorted(found)
    if before != after:
        await audit(
            db,
            tenant_id,
            actor_id or user_id,
            "group.membership_sync",
            f"user:{user_id}",
            target_user_id=user_id,
            before=before,
            after=after,
        )
    return after


async def group_names_of(db: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> list[str]:
    """The names of the groups a user is in (their data export)."""
    return [g.name for g in await GroupRepository(db, tenant_id).groups_of(user_id)]


async def remove_memberships(
    db: AsyncSession, tenant_id: uuid.UUID, actor_id: uuid.UUID, user_id: uuid.UUID
) -> None:
    """Erase a user's memberships (erasure), audited."""
    removed = await GroupRepository(db, tenant_id).remove_user(user_id)
    if removed:
        await audit(
            db,
            tenant_id,
            actor_id,
            "group.memberships_erased",
            f"user:{user_id}",
            target_user_id=user_id,
            before=[str(g) for g in removed],
            after=[],
        )

"""Row-level security alone keeps a user out of the collections they may not see: a query
that forgets every filter, run as the application role in a request's scope, returns no
chunk or document of an invisible collection, and cannot write one (issue 30, item 3)."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from app.access.repository import visible_collection_ids
from app.core.db import collections_literal, scope_to_tenant
from app.models import Group, GroupMember, KbCollection, KbCollectionGroup
from tests.chat_helpers import add_kb_document
from tests.collections.world import PUBLIC, PUBLIC_TITLE, SECRET, SECRET_TITLE
from tests.factories import make_tenant, make_user


async def _board_collection(db: AsyncSession, tenant_id: uuid.UUID, member: uuid.UUID) -> uuid.UUID:
    await scope_to_tenant(db, tenant_id)
    group = Group(tenant_id=tenant_id, id=uuid.uuid4(), name="Board")
    board = KbCollection(tenant_id=tenant_id, id=uuid.uuid4(), name="Board", visibility="groups")
    db.add_all([group, board])
    await db.flush()
    db.add_all(
        [
            GroupMember(tenant_id=tenant_id, group_id=group.id, user_id=member),
            KbCollectionGroup(tenant_id=tenant_id, collection_id=board.id, group_id=group.id),
        ]
    )
    await db.commit()
    return board.id


async def _scope(connection: AsyncConnection, tenant: uuid.UUID, visible: list[uuid.UUID]) -> None:
    await connection.execute(
        text(
            "SELECT set_config('threadline.tenant_id', :t, true), "
            "set_config('threadline.collections', :c, true)"
        ),
        {"t": str(tenant), "c": collections_literal(visible)},
    )


async def test_a_query_without_a_filter_sees_no_chunk_of_an_invisible_collection(
    db: AsyncSession, connection: AsyncConnection
) -> None:
    tenant = await make_tenant(db)
    member = await make_user(db, tenant)
    outsider = await make_user(db, tenant)
    board = await _board_collection(db, tenant.id, member.id)
    await add_kb_document(db, tenant, PUBLIC_TITLE, PUBLIC)
    secret = await add_kb_document(db, tenant, SECRET_TITLE, SECRET)
    await scope_to_tenant(db, tenant.id)
    await db.execute(
        text("UPDATE kb_documents SET collection_id = :b WHERE id = :d"),
        {"b": board, "d": secret.id},
    )
    await db.commit()
    seen_by = {
        who: await visible_collection_ids(db, tenant.id, user.id)
        for who, user in (("member", member), ("outsider", outsider))
    }
    assert board in seen_by["member"] and board not in seen_by["outsider"]

    forgetful = {
        "chunks": "SELECT count(*) FROM kb_chunks WHERE text LIKE '%zephyr%'",
        "documents": "SELECT count(*) FROM kb_documents WHERE title = 'Board minutes'",
        "nearest": (
            "SELECT count(*) FROM (SELECT id FROM kb_chunks ORDER BY embedding <=> "
            "(SELECT embedding FROM kb_chunks LIMIT 1) LIMIT 10) AS nearest"
        ),
    }
    counts: dict[tuple[str, str], int] = {}
    for who, visible in seen_by.items():
        for name, statement in forgetful.items():
            async with connection.begin_nested():
                await _scope(connection, tenant.id, visible)
                counts[who, name] = int((await connection.execute(text(statement))).scalar_one())
    assert counts == {
        ("member", "chunks"): 1,
        ("member", "documents"): 1,
        ("member", "nearest"): 2,
        ("outsider", "chunks"): 0,
        ("outsider", "documents"): 0,
        ("outsider", "nearest"): 1,  # the public chunk only: the other is not there at all
    }


async def test_nothing_can_be_written_into_an_invisible_collection(
    db: AsyncSession, connection: AsyncConnection
) -> None:
    tenant = await make_tenant(db)
    member = await make_user(db, tenant)
    outsider = await make_user(db, tenant)
    board = await _board_collection(db, tenant.id, member.id)
    public = await add_kb_document(db, tenant, PUBLIC_TITLE, PUBLIC)
    visible = await visible_collection_ids(db, tenant.id, outsider.id)
    await db.commit()
    with pytest.raises(DBAPIError, match="row-level security"):
        async with connection.begin_nested():
            await _scope(connection, tenant.id, visible)
            await connection.execute(
                text("UPDATE kb_documents SET collection_id = :b WHERE id = :d"),
                {"b": board, "d": public.id},
            )
    # Nor may an empty list be read as "everything": it is nothing.
    async with connection.begin_nested():
        await _scope(connection, tenant.id, [])
        assert (await connection.execute(text("SELECT count(*) FROM kb_chunks"))).scalar_one() == 0

"""`GET /me/export`: everything Threadline holds about a user, streamed as one JSON document.

Rows are read through server-side cursors in batches (`yield_per`) inside one transaction and
written out as they arrive, so memory stays flat however long the history: a 10,000-turn
export holds one batch at a time (bench/privacy.py measures it).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.access.scope import restrict_to_user
from app.access.withhold import withhold_sources
from app.core.db import scope_to_tenant
from app.groups.service import group_names_of
from app.privacy.repository.export import json_batches, profile, sections

FORMAT_VERSION = 1
WITHHELD_FROM_REDUCED_KEYS = ("api_keys", "audit_actions")
"""What a reduced key's export cuts: the other keys of the account (only admins may list
keys) and the account's admin actions (only admins may read the audit log)."""


def _default(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def _json(value: Any) -> bytes:
    return json.dumps(value, default=_default, ensure_ascii=False, separators=(",", ":")).encode()


async def _withheld_turns(db: AsyncSession, tenant_id: uuid.UUID, rows: list[str]) -> list[str]:
    """Turns (JSON text) with the sources the user may no longer see withheld; the rows of a
    batch that withholds nothing are passed on as PostgreSQL wrote them."""
    turns = [json.loads(row) for row in rows]
    manifests = [t.get("context_metadata") for t in turns]
    shown = await withhold_sources(db, tenant_id, manifests)
    if all(a is b for a, b in zip(manifests, shown, strict=True)):
        return rows
    return [
        _json({**t, "context_metadata": m}).decode() if m is not t.get("context_metadata") else r
        for t, m, r in zip(turns, shown, rows, strict=True)
    ]


async def export_user(
    sessionmaker: async_sessionmaker[AsyncSession],
    tenant_id: uuid.UUID,
    user_id: uuid.UUID,
    *,
    batch_rows: int,
    only_key: uuid.UUID | None = None,
) -> AsyncIterator[bytes]:
    """The export document, piece by piece; one transaction, so it is one consistent view.

    `only_key`: the export is asked for by this key, which carries less than its account's
    role (a member key of an admin). It then holds what that role may read: of the account's
    keys only this one, and none of its admin actions; `withheld` names what was cut
    (docs/adr/0047)."""
    withheld = WITHHELD_FROM_REDUCED_KEYS if only_key is not None else ()
    async with sessionmaker() as db:
        await scope_to_tenant(db, tenant_id)
        async with db.begin():
            # The export shows the sources the user may still see (ADR 0078); a reduced key,
            # what its role may (is_admin None: the account's role decides).
            reduced = only_key is not None
            await restrict_to_user(db, tenant_id, user_id, is_admin=False if reduced else None)
            head = {
                "format_version": FORMAT_VERSION,
                "generated_at": datetime.now(UTC),
                "user": await profile(db, tenant_id, user_id),
                "groups": await group_names_of(db, tenant_id, user_id),
                "withheld": list(withheld),
            }
            yield _json(head)[:-1]  # the object stays open for the lists that follow
            for name, statement, order in sections(tenant_id, user_id, only_key=only_key):
                yield b',"' + name.encode() + b'":['
                first = True
                async for batch in json_batches(db, statement, order, batch_rows):
                    if name == "turns":
                        batch = await _withheld_turns(db, tenant_id, batch)
                    chunk = ",".join(batch).encode()
                    yield chunk if first else b"," + chunk
                    first = False
                yield b"]"
            yield b"}"

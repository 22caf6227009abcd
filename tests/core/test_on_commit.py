"""Work buffered with `on_commit` runs once the transaction commits, and never on rollback."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.jobs import RUNNER, Job, enqueue_after_commit
from app.core.on_commit import on_commit
from app.models import Tenant
from app.tenants.repository import insert_tenant


async def _write(db: AsyncSession) -> None:
    """Some work in the session's (uncommitted) transaction."""
    tenant_id = uuid.uuid4()
    await insert_tenant(db, Tenant(id=tenant_id, name=f"t-{tenant_id.hex[:8]}", settings={}))


async def test_a_callback_runs_only_after_the_commit(db: AsyncSession) -> None:
    ran: list[str] = []
    await _write(db)
    on_commit(db, lambda: ran.append("after"))
    await db.flush()
    assert ran == []  # the data is not committed yet: nothing may act on it
    await db.commit()
    assert ran == ["after"]
    await db.commit()  # the next transaction starts with nothing buffered
    assert ran == ["after"]


async def test_a_rollback_drops_the_callbacks(db: AsyncSession) -> None:
    ran: list[str] = []
    await _write(db)
    on_commit(db, lambda: ran.append("after"))
    await db.rollback()
    await _write(db)
    await db.commit()
    assert ran == []


async def test_a_failing_callback_lets_the_others_run_then_is_reported(db: AsyncSession) -> None:
    ran: list[str] = []

    def fail() -> None:
        raise RuntimeError("broker down")

    on_commit(db, fail)
    on_commit(db, lambda: ran.append("cache cleared"))
    await _write(db)
    with pytest.raises(RuntimeError, match="broker down"):
        await db.commit()
    assert ran == ["cache cleared"]


class _RefusingBroker:
    def submit(self, job: Job) -> None:
        raise ConnectionError("broker down")


async def test_an_optional_job_a_broker_refuses_is_logged_not_raised(
    db: AsyncSession, caplog: pytest.LogCaptureFixture
) -> None:
    """The summary job is optional: a turn whose data committed must not fail because the
    broker refused it (the next turn enqueues it again); a required job still raises."""
    db.info[RUNNER] = _RefusingBroker()
    await _write(db)
    enqueue_after_commit(db, Job("threadline.summarize"), optional=True)
    await db.commit()
    assert "optional job not enqueued" in caplog.text

    await _write(db)
    enqueue_after_commit(db, Job("threadline.ingest"))
    with pytest.raises(ConnectionError, match="broker down"):
        await db.commit()

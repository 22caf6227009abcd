"""Work that must wait for the transaction: callbacks run after it commits, dropped on rollback.

The request dependency (`get_db`) or the task owns the transaction; a service that has
something to do once its rows are stored (hand a job to a worker, make a cache forget a
tenant) buffers a callback on the database session instead of committing early. A callback
runs inside SQLAlchemy's `after_commit` event: it must be quick and synchronous, and it does
not touch the session. If a callback raises, the others still run and the first error then
propagates from `commit()` (as a job the broker refused always did): the data is committed,
but the caller learns that what should follow it did not happen.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

logger = logging.getLogger(__name__)

PENDING = "threadline.on_commit"


def on_commit(db: Any, callback: Callable[[], None]) -> None:
    """Run `callback` once the (async or sync) session's transaction commits; never on rollback."""
    db.info.setdefault(PENDING, []).append(callback)


@event.listens_for(Session, "after_commit")
def _run(db: Session) -> None:
    callbacks: list[Callable[[], None]] = db.info.pop(PENDING, [])
    failure: Exception | None = None
    for callback in callbacks:
        try:
            callback()
        except Exception as error:
            logger.exception("after-commit callback failed")
            failure = failure or error
    if failure is not None:
        raise failure


@event.listens_for(Session, "after_rollback")
def _drop(db: Session) -> None:
    db.info.pop(PENDING, None)

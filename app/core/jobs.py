"""Background jobs, enqueued only after the transaction that created their data commits.

A job is one use of the `on_commit` hook: handed to the runner once the database session commits and
dropped on rollback, so a worker never looks for a row that was not stored. The runner is
Celery when a broker is configured (`CELERY_BROKER_URL`), else an in-process task runner.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from app.core.on_commit import on_commit

if TYPE_CHECKING:
    from celery import Celery

logger = logging.getLogger(__name__)

RUNNER = "threadline.job_runner"


@dataclass(frozen=True)
class Job:
    """A named background task and its (string) arguments."""

    name: str
    kwargs: dict[str, str] = field(default_factory=dict)


class JobRunner(Protocol):
    """Where committed jobs go: in-process tasks or Celery."""

    def submit(self, job: Job) -> None:
        """Start or publish `job` (called after its transaction committed)."""


def enqueue_after_commit(db: Any, job: Job, *, optional: bool = False) -> None:
    """Hand `job` to the session's runner once the (async or sync) session commits.

    `optional`: a job whose loss only delays work (the summary job: the next turn enqueues
    it again) is logged if it cannot be handed over (a broker down), instead of failing the
    commit's caller after its data is stored."""
    info = db.info
    on_commit(db, lambda: _submit(info, job, optional))


def _submit(info: dict[str, Any], job: Job, optional: bool = False) -> None:
    runner: JobRunner | None = info.get(RUNNER)
    if runner is None:
        logger.error("jobs committed without a runner", extra={"jobs": [job.name]})
        return
    try:
        runner.submit(job)
    except Exception:
        if not optional:
            raise
        logger.warning("optional job not enqueued", extra={"job": job.name}, exc_info=True)


Handler = Callable[..., Awaitable[Any]]


class InProcessJobs:
    """Runs jobs as asyncio tasks of this process (the embedded default)."""

    def __init__(self, handlers: dict[str, Handler]) -> None:
        self.handlers = handlers
        self._tasks: set[asyncio.Task[Any]] = set()

    def submit(self, job: Job) -> None:
        """Run `job` as a task on the running event loop."""
        task = asyncio.get_running_loop().create_task(self._run(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, job: Job) -> None:
        try:
            await self.handlers[job.name](**job.kwargs)
        except Exception:
            logger.exception("job failed", extra={"job": job.name})

    async def drain(self) -> None:
        """Wait for every submitted job (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


class CeleryJobs:
    """Publishes jobs to the Celery broker; workers run them (app.worker.tasks)."""

    def __init__(self, app: Celery) -> None:
        """`app`: the Celery application to publish through, built by the composition root
        (`app.bootstrap.create_celery`): the shared kit never reaches up for it."""
        self.app = app

    def submit(self, job: Job) -> None:
        """Publish `job` to the broker."""
        self.app.send_task(job.name, kwargs=job.kwargs)

    async def drain(self) -> None:
        """Nothing to wait for: the workers run the jobs."""
        return None

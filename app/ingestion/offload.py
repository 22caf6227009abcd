"""Where ingestion's CPU work runs: worker processes, never the event loop.

`prepare` (extract, sanitise, anonymise, chunk) is pure Python holding the GIL for seconds
on a large file; in a thread it would still take the interpreter from the event loop, so it
runs in a small pool of spawned worker processes. They are niced, so the API's own work
comes first on a busy machine. The pool starts with the first document that needs it. A
small text file is cheaper to prepare here than to send to another process.

Each worker process is a slot of its own (a one-process executor), so one that must be
stopped takes no other document with it. A slot's process is replaced after
`MAX_TASKS_PER_WORKER` documents, so the memory a large document left fragmented goes back
to the system. Not `max_tasks_per_child`: on Python 3.11 a pool never replaces a worker
that reached its limit while work is queued (CPython gh-115634, issue 31).

Each document has a CPU budget (`PrepareOptions.cpu_seconds`), enforced in the worker with
`RLIMIT_CPU`: past it, SIGXCPU stops the work with `OverBudget` (a permanent failure, with
a readable error) and the slot's process is replaced. A worker stuck where the signal
cannot reach (inside one C call) is killed at `WALL_FACTOR` times the budget in wall-clock
time. Documents waiting for a slot are served tenant by tenant in turn (`FairQueue`), so
one tenant's uploads never hold another's behind them (issue 33).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import math
import os
import resource
import signal
from collections.abc import Callable, Hashable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from types import FrameType

from app.core.child_process import die_with_parent, end_result_pipe, spawned_executor
from app.ingestion.extract import TEXT_TYPES
from app.ingestion.fair import FairQueue
from app.ingestion.prepare import Prepared, PrepareError, PrepareOptions, prepare

logger = logging.getLogger(__name__)

Work = Callable[[bytes, PrepareOptions], Prepared]

INLINE_MAX_BYTES = 16 * 1024
"""A text file this small is prepared on the event loop (about a millisecond)."""
MAX_TASKS_PER_WORKER = 20
WORKER_NICENESS = 10
WALL_FACTOR = 4
"""A document still in its worker after this many times its CPU budget (wall clock) has
its worker killed: a niced worker on a busy machine gets a fraction of a core."""


class WorkerLost(RuntimeError):
    """The process preparing the document died (killed, out of memory): a transient error."""


class OverBudget(PrepareError):
    """The document took more than its CPU budget: a permanent failure."""


def _over_budget(seconds: float) -> OverBudget:
    return OverBudget(
        f"The document took more than {seconds:g} s of CPU to read and was stopped; "
        "it may be malformed or built to be slow (a PDF whose pages repeat a huge content "
        "stream, for instance)."
    )


def _start_worker(parent: int) -> None:
    with contextlib.suppress(OSError):  # not permitted here: run at the normal priority
        os.nice(WORKER_NICENESS)
    die_with_parent(parent)
    signal.signal(signal.SIGXCPU, _on_cpu_limit)


class _CpuLimit(BaseException):
    """Raised by SIGXCPU inside the work (a BaseException: no `except Exception` of the
    extraction code swallows it)."""


def _on_cpu_limit(signum: int, frame: FrameType | None) -> None:
    raise _CpuLimit


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def within_budget(work: Work, source: bytes, options: PrepareOptions) -> Prepared:
    """`work(source, options)` in a worker, stopped by SIGXCPU past `options.cpu_seconds`
    of CPU (RLIMIT_CPU counts the whole process: the limit is set above what it used)."""
    budget = options.cpu_seconds
    if budget is None:
        return work(source, options)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    limit = math.ceil(_cpu_used() + budget)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (limit, hard))
        return work(source, options)
    except _CpuLimit:
        raise _over_budget(budget) from None
    finally:
        with contextlib.suppress(_CpuLimit):  # a signal racing the reset: already stopped
            resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, if this is glibc."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


@dataclass
class _Slot:
    """One worker process (started on first use) and the documents it has prepared."""

    executor: ProcessPoolExecutor | None = None
    documents: int = 0


class PreparePool:
    """Runs `prepare` for the pipeline: in `workers` processes, or in threads when 0."""

    def __init__(self, workers: int = 0, work: Work = prepare) -> None:
        self.workers = workers
        self.work = work
        """What runs: `prepare`, or a picklable stand-in (tests pause it mid-document)."""
        self._slots = [_Slot() for _ in range(workers)]
        self._queue: FairQueue[_Slot] | None = None
        self._trim = _malloc_trim()
        self._trims_owed = 0
        self._trim_again = False
        self._trimming: asyncio.Future[None] | None = None

    def _executor(self, slot: _Slot) -> ProcessPoolExecutor:
        if slot.documents >= MAX_TASKS_PER_WORKER:
            self._retire(slot)
        if slot.executor is None:
            slot.executor = spawned_executor(_start_worker)
            slot.documents = 0
        slot.documents += 1
        return slot.executor

    @staticmethod
    def _retire(slot: _Slot) -> None:
        """Its process exits (it holds no document); the next document starts a new one."""
        executor, slot.executor = slot.executor, None
        if executor is not None:
            executor.shutdown(wait=False)

    @staticmethod
    def _kill(slot: _Slot) -> None:
        """Stop the slot's process now, mid-document (no public way to stop a running task)."""
        executor, slot.executor = slot.executor, None
        if executor is not None:
            for process in list(getattr(executor, "_processes", {}).values()):
                process.kill()
            end_result_pipe(executor)  # before shutdown, which forgets the pipe
            executor.shutdown(wait=False, cancel_futures=True)

    async def prepare(
        self, source: bytes, options: PrepareOptions, *, turn: Hashable = None
    ) -> Prepared:
        """`prepare(source, options)`, off the event loop unless the file is tiny text.
        `turn`: whose document it is (the tenant); waiting documents get a worker tenant
        by tenant in turn."""
        if options.content_type in TEXT_TYPES and len(source) <= INLINE_MAX_BYTES:
            return self.work(source, options)
        loop = asyncio.get_running_loop()
        self._trims_owed += 1
        if not self._slots:  # threads: the default thread pool bounds them; no budget
            return await loop.run_in_executor(None, self.work, source, options)
        if self._queue is None:
            self._queue = FairQueue(self._slots)
        slot = await self._queue.acquire(turn)
        try:
            executor = self._executor(slot)
            running = loop.run_in_executor(executor, within_budget, self.work, source, options)
            budget = options.cpu_seconds
            try:
                wall = None if budget is None else WALL_FACTOR * budget
                return await asyncio.wait_for(running, wall)
            except TimeoutError:
                self._kill(slot)
                raise _over_budget(budget or 0) from None
            except OverBudget:
                self._retire(slot)  # a fresh process for the next document
                raise
            except BrokenProcessPool as exc:
                logger.warning("ingestion worker lost; a new one takes its place")
                self._kill(slot)
                raise WorkerLost("The process preparing the document stopped.") from exc
            except asyncio.CancelledError:
                self._kill(slot)  # nobody waits for its result: do not finish it
                raise
        finally:
            self._queue.release(slot)

    def release_memory(self) -> None:
        """Hand the memory a large document left free back to the system, in a thread.

        glibc keeps freed memory in its heaps, fragmented by the many strings and buffers
        of a large document (upload, chunks, vectors, statement parameters): without this
        the API's RSS stayed hundreds of MB above its start after three 24 MB uploads."""
        if self._trim is None or self._trims_owed == 0:
            return
        self._trims_owed -= 1  # one a large document: each leaves memory when its job ends
        if self._trimming is not None and not self._trimming.done():
            self._trim_again = True  # the job that just ended freed more since it started
            return
        self._trimming = asyncio.ensure_future(self._trim_now(self._trim))

    async def _trim_now(self, trim: Callable[[int], int]) -> None:
        self._trim_again = True
        while self._trim_again:
            self._trim_again = False
            await asyncio.to_thread(trim, 0)

    def terminate(self) -> None:
        """Stop the worker processes now, mid-document (shutdown: what they were preparing
        is handed back to another process, not finished here)."""
        for slot in self._slots:
            executor = slot.executor
            self._kill(slot)
            if executor is not None:
                executor.shutdown(wait=True)

    def shutdown(self) -> None:
        """Stop the worker processes (a later document starts new ones)."""
        for slot in self._slots:
            executor, slot.executor = slot.executor, None
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)

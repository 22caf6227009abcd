"""Where ingestion's CPU work runs: worker processes, never the event loop.

`prepare` (extract, sanitise, anonymise, chunk) is pure Python holding the GIL for seconds
on a large file; in a thread it would still take the interpreter from the event loop, so it
runs in a small pool of spawned worker processes. They are niced, so the API's own work
comes first on a busy machine. The pool starts with the first document that needs it. A
small text file is cheaper to prepare here than to send to another process.

Workers are replaced after about `MAX_TASKS_PER_WORKER` documents each, so the memory a
large document left fragmented goes back to the system: after `workers x
MAX_TASKS_PER_WORKER` documents the pool is retired (it finishes what it holds, then its
processes exit) and the next document starts a new one. Not `max_tasks_per_child`: on
Python 3.11 a pool never replaces a worker that reached its limit while work is queued
(CPython gh-115634), and in-process ingestion stopped for good after 40 documents, their
leases renewed forever by a live process (issue 31). At most `workers` documents are in
the workers at once (a semaphore), so a retired pool and its successor never together run
more than `workers` documents.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from app.ingestion.extract import PDF
from app.ingestion.prepare import Prepared, PrepareOptions, prepare

logger = logging.getLogger(__name__)

Work = Callable[[bytes, PrepareOptions], Prepared]

INLINE_MAX_BYTES = 16 * 1024
"""A text file this small is prepared on the event loop (about a millisecond)."""
MAX_TASKS_PER_WORKER = 20
WORKER_NICENESS = 10
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class WorkerLost(RuntimeError):
    """The process preparing the document died (killed, out of memory): a transient error."""


def _start_worker(parent: int) -> None:
    with contextlib.suppress(OSError):  # not permitted here: run at the normal priority
        os.nice(WORKER_NICENESS)
    _die_with_parent(parent)


def _die_with_parent(parent: int) -> None:
    """An API process killed with SIGKILL takes its workers along, mid-document or not
    (otherwise they finish a document nobody will store). The signal follows the spawning
    thread, the event loop's or the pool's manager's, which both live as long as the pool.
    Linux only; elsewhere workers end when they next look for work."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died while this process was starting
        os._exit(1)


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, if this is glibc."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


class PreparePool:
    """Runs `prepare` for the pipeline: in `workers` processes, or in threads when 0."""

    def __init__(self, workers: int = 0, work: Work = prepare) -> None:
        self.workers = workers
        self.work = work
        """What runs: `prepare`, or a picklable stand-in (tests pause it mid-document)."""
        self._executor: Executor | None = None
        self._sent_to_executor = 0
        self._slots: asyncio.Semaphore | None = None
        self._trim = _malloc_trim()
        self._trims_owed = 0
        self._trim_again = False
        self._trimming: asyncio.Future[None] | None = None

    def _pool(self) -> Executor | None:
        if self.workers == 0:
            return None  # the event loop's default thread pool
        if self._sent_to_executor >= self.workers * MAX_TASKS_PER_WORKER:
            self._retire()
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),  # no forked event loop or sockets
                initializer=_start_worker,
                initargs=(os.getpid(),),
            )
            self._sent_to_executor = 0
        self._sent_to_executor += 1
        return self._executor

    def _retire(self) -> None:
        """Let the current pool finish what it holds, then its processes exit; the next
        document starts a new pool (fresh processes, their memory back to the system)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)

    async def prepare(self, source: bytes, options: PrepareOptions) -> Prepared:
        """`prepare(source, options)`, off the event loop unless the file is tiny text."""
        if options.content_type != PDF and len(source) <= INLINE_MAX_BYTES:
            return self.work(source, options)
        if self._slots is None:
            # Threads (workers=0) are not bounded here: the default thread pool is.
            self._slots = asyncio.Semaphore(self.workers or 1_000_000)
        async with self._slots:
            executor = self._pool()
            self._trims_owed += 1
            try:
                return await asyncio.get_running_loop().run_in_executor(
                    executor, self.work, source, options
                )
            except BrokenProcessPool as exc:
                self._discard(executor)
                raise WorkerLost("The process preparing the document stopped.") from exc

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

    def _discard(self, broken: Executor | None) -> None:
        if broken is not None and broken is self._executor:
            logger.warning("ingestion worker lost; starting a new pool")
            self._executor = None
            broken.shutdown(wait=False, cancel_futures=True)

    def terminate(self) -> None:
        """Stop the worker processes now, mid-document (shutdown: what they were preparing
        is handed back to another process, not finished here)."""
        executor, self._executor = self._executor, None
        if isinstance(executor, ProcessPoolExecutor):
            # No public way to stop a running task; the processes of this pool only.
            for process in list(getattr(executor, "_processes", {}).values()):
                process.kill()
            executor.shutdown(wait=True, cancel_futures=True)

    def shutdown(self) -> None:
        """Stop the worker processes (a later document starts new ones)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

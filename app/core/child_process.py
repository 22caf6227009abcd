"""Worker processes the API process spawns for CPU work that must not hold its interpreter:
they die with it, and one started lazily serves a kind of work for the process's life.

A thread is not enough for pure-Python work: it holds the GIL until the switch interval
(5 ms) asks for it back, and the event loop needs the GIL after every system call, so a
`/healthz` round trip waited tens of milliseconds behind it (ADR 0091)."""

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
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
R = TypeVar("R")


def die_with_parent(parent: int) -> None:
    """Called first in a worker: an API process killed with SIGKILL takes its workers
    along (otherwise they finish work nobody will read). The signal follows the spawning
    thread, the event loop's or the pool's manager's, which both live as long as the pool.
    Linux only; elsewhere workers end when they next look for work."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died while this process was starting
        os._exit(1)


def spawned_executor(
    initializer: Callable[[int], None] = die_with_parent,
) -> ProcessPoolExecutor:
    """A one-process executor, spawned (no forked event loop or sockets); `initializer`
    receives this process's pid and must call `die_with_parent` with it."""
    return ProcessPoolExecutor(
        1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=initializer,
        initargs=(os.getpid(),),
    )


def end_result_pipe(executor: ProcessPoolExecutor) -> None:
    """After its worker was killed: close this process's copy of the pipe results come back
    on, so a result the worker was killed while sending ends (EOF) instead of being waited
    for. Otherwise the executor's manager thread waits for the rest of it for good, and
    the interpreter, which joins that thread at exit, never exits: a SIGTERM'd server
    killed its worker mid-result and hung (issue 31, item 5). CPython keeps the writing end
    open in the parent too (3.11; no public way to close it); the executor is discarded."""
    queue = getattr(executor, "_result_queue", None)
    writer = getattr(queue, "_writer", None)
    if writer is not None:
        with contextlib.suppress(OSError):
            writer.close()


class OneProcess:
    """One worker process, started on first use, for short CPU-bound calls."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._executor: ProcessPoolExecutor | None = None

    async def call(self, work: Callable[..., R], *args: object) -> R:
        """`work(*args)` in the worker (both picklable); a worker that died (killed, out
        of memory) is replaced and the call made once more in the new one."""
        loop = asyncio.get_running_loop()
        for attempt in (1, 2):
            if self._executor is None:
                self._executor = spawned_executor()
            executor = self._executor
            try:
                return await loop.run_in_executor(executor, work, *args)
            except BrokenProcessPool:
                if self._executor is executor:
                    self._executor = None
                executor.shutdown(wait=False)
                if attempt == 2:
                    raise
                logger.warning("%s worker lost; a new one takes its place", self.name)
        raise AssertionError("unreachable")

    @property
    def started(self) -> bool:
        """Whether a worker process is up."""
        return self._executor is not None

    def shutdown(self) -> None:
        """Stop the worker (a later call starts a new one)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

"""The ingestion workers keep working past their per-worker document limit (issue 31: on
Python 3.11 a ProcessPoolExecutor with `max_tasks_per_child` never replaces a worker that
reached it while work is queued, CPython gh-115634, and in-process ingestion stopped for good
after 40 documents)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

from app.ingestion.prepare import PrepareOptions

ROOT = Path(__file__).resolve().parents[2]

# Run in a process of its own: a pool stuck as on Python 3.11 can be neither used nor shut
# down (its manager thread waits for good), so the test can only end it from outside.
SCRIPT = """
import asyncio, json, os
from typing import cast
from app.ingestion import offload
from app.ingestion.extract import PDF
from app.ingestion.offload import PreparePool, Work
from app.ingestion.prepare import PrepareOptions
from tests.knowledge.test_prepare_pool import worker_pid

offload.MAX_TASKS_PER_WORKER = 2
OPTIONS = PrepareOptions(
    content_type=PDF,  # never prepared inline: always sent to a worker process
    anonymise=False, chunk_tokens=100, chunk_overlap=0, max_chars=1000, max_pages=10,
)

async def main():
    pool = PreparePool(2, work=cast(Work, worker_pid))
    documents = [f"document {i}".encode() for i in range(12)]  # three times 2 workers x 2
    results = await asyncio.gather(*(pool.prepare(d, OPTIONS) for d in documents))
    await asyncio.to_thread(pool.shutdown)
    print(json.dumps([[source.decode(), pid] for source, pid in results]))

asyncio.run(main())
"""


def worker_pid(source: bytes, options: PrepareOptions) -> tuple[bytes, int]:
    """A stand-in for `prepare`, in a worker: what it was given and which process it ran in."""
    return source, os.getpid()


def test_documents_past_every_workers_limit_are_still_prepared_by_fresh_processes() -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("documents still waiting for a worker after 90 s") from None
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    assert [source for source, _ in answers] == [f"document {i}" for i in range(12)]
    processes = {pid for _, pid in answers}
    # Each pool (2 workers) takes 4 documents, then gives way to a new one: at least three
    # pools' worth of processes, none of which ran more than its share.
    assert len(processes) >= 3
    for pid in processes:
        assert sum(1 for _, p in answers if p == pid) <= 4


# A worker killed while it sends its result back: the parent has read part of the message.
KILLED_MID_RESULT = """
import asyncio, time
from typing import cast
from app.ingestion.extract import PDF
from app.ingestion.offload import OverBudget, PreparePool, Work
from app.ingestion.prepare import PrepareOptions
from tests.knowledge.test_prepare_pool import half_a_result

OPTIONS = PrepareOptions(
    content_type=PDF, anonymise=False, chunk_tokens=100, chunk_overlap=0, max_chars=1000,
    max_pages=10, cpu_seconds=1.5,  # stopped by the wall clock (4 x 1.5 s), after it wrote
)

async def main():
    pool = PreparePool(1, work=cast(Work, half_a_result))
    try:
        await pool.prepare(b"document", OPTIONS)
    except OverBudget:
        pass
    await asyncio.to_thread(pool.terminate)  # what shutdown does
    print("stopped", flush=True)

asyncio.run(main())
"""


def half_a_result(source: bytes, options: PrepareOptions) -> None:
    """A stand-in for `prepare` that writes the start of a 1 MB result on the pipe results
    go back on, then waits to be killed, as a worker killed mid-send leaves it."""
    frame = sys._getframe()
    while frame is not None and "result_queue" not in frame.f_locals:
        frame = frame.f_back  # type: ignore[assignment]
    assert frame is not None, "not in a ProcessPoolExecutor worker"
    writer = frame.f_locals["result_queue"]._writer
    os.write(writer.fileno(), struct.pack("!i", 1 << 20) + b"x" * 4096)
    time.sleep(60)


def test_a_worker_killed_while_sending_its_result_does_not_hold_the_process_at_exit() -> None:
    """Issue 31, item 5: a SIGTERM'd server killed its worker mid-result, and the executor's
    manager thread waited for the rest of the message for good: the interpreter, which joins
    that thread at exit, never exited."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", KILLED_MID_RESULT],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        stopped = "stopped" in str(exc.stdout or "")
        raise AssertionError(f"still running 30 s later (pool stopped: {stopped})") from None
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped"

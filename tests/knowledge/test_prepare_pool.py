"""The ingestion workers keep working past their per-worker document limit (issue 31: on
Python 3.11 a ProcessPoolExecutor with `max_tasks_per_child` never replaces a worker that
reached it while work is queued, CPython gh-115634, and in-process ingestion stopped for good
after 40 documents)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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

"""Waiting documents get a worker tenant by tenant in turn (issue 33 item 6): a tenant with
many documents queued does not hold another's behind them."""

from __future__ import annotations

import asyncio

from app.ingestion.fair import FairQueue


async def test_a_tenant_with_one_document_is_served_before_anothers_backlog() -> None:
    queue = FairQueue(["worker"])
    served: list[str] = []

    async def document(tenant: str, name: str) -> None:
        item = await queue.acquire(tenant)
        served.append(name)
        await asyncio.sleep(0)
        queue.release(item)

    first = await queue.acquire("busy")  # the only worker is taken
    backlog = [asyncio.ensure_future(document("busy", f"busy-{i}")) for i in range(5)]
    await asyncio.sleep(0)
    other = asyncio.ensure_future(document("other", "other"))
    await asyncio.sleep(0)
    queue.release(first)
    await asyncio.gather(*backlog, other)
    assert served[:2] == ["busy-0", "other"]
    assert served[2:] == [f"busy-{i}" for i in range(1, 5)]


async def test_a_cancelled_waiter_gives_its_turn_away() -> None:
    queue = FairQueue(["worker"])
    first = await queue.acquire("a")
    gone = asyncio.ensure_future(queue.acquire("a"))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    queue.release(first)
    assert await asyncio.wait_for(queue.acquire("b"), 1) == "worker"

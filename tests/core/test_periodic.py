"""The in-process timer stops even when its job absorbs the cancellation."""

from __future__ import annotations

import asyncio

from app.core.periodic import Periodic


async def test_stop_ends_the_timer_when_the_job_swallows_the_cancellation() -> None:
    runs = 0
    started = asyncio.Event()

    async def stubborn() -> None:
        # What a library cleaning up a connection may do: catch the cancellation and return.
        nonlocal runs
        runs += 1
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return

    timer = Periodic("stubborn", 0.01, stubborn, at_start=True)
    timer.start()
    await asyncio.wait_for(started.wait(), 5)
    stopping = asyncio.ensure_future(timer.stop())
    done, _ = await asyncio.wait({stopping}, timeout=5)
    assert stopping in done, "stop() waits for a timer that never ends"
    assert runs == 1


async def test_a_failing_job_is_run_again_at_the_next_tick() -> None:
    runs = 0

    async def failing() -> None:
        nonlocal runs
        runs += 1
        raise RuntimeError("PostgreSQL away")

    timer = Periodic("failing", 0.01, failing, at_start=True)
    timer.start()
    for _ in range(200):
        if runs >= 3:
            break
        await asyncio.sleep(0.01)
    await asyncio.wait_for(timer.stop(), 5)
    assert runs >= 3

"""How a test says "this costs little" without a wall-clock bound.

A fixed bound in seconds fails on a loaded machine (CI ran a 0.13 s check in 1.4 s) and passes
a quadratic regression on a fast one. These helpers compare two costs measured in the same run
instead: each is the least of a few runs of this process's CPU time, so neither other processes
on the machine nor the odd pause moves the ratio.
"""

from __future__ import annotations

import time
from collections.abc import Callable

RUNS = 3


def cpu_seconds(work: Callable[[], object]) -> float:
    """The least CPU time this process spent on `work` over `RUNS` runs."""
    least = float("inf")
    for _ in range(RUNS):
        started = time.process_time()
        work()
        least = min(least, time.process_time() - started)
    return least


def assert_linear(work: Callable[[int], object], size: int) -> None:
    """`work(4 * size)` costs at most 8 times `work(size)`: 4 times when linear, 16 when
    quadratic, so the bound sits between the two with room for noise."""
    small = cpu_seconds(lambda: work(size))
    large = cpu_seconds(lambda: work(4 * size))
    assert large <= 8 * small, f"{4 * size}: {large:.3f} s, {size}: {small:.3f} s"

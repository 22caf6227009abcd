"""/healthz probed from a process of its own, so the bench's own work cannot delay a probe.

    python -m bench.healthz_probe BASE_URL

probes open-loop every 20 ms (as `bench.upload_stall` does) until its standard input
closes, then prints `{"latencies": [ms, ...], "errors": n}`. A bench that drives hundreds
of HTTP clients itself (`bench.attacks`' resume flood) stalled its own event loop for up to
a second at a time; probes sent from that loop measured the bench, not the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator

from bench.upload_stall import Probes, _probe_until


@contextlib.asynccontextmanager
async def probing_apart(base: str) -> AsyncIterator[Probes]:
    """Probes `base` from another process for as long as the block runs; the returned
    `Probes` is filled when it ends."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.healthz_probe",
        base,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    probes = Probes()
    try:
        yield probes
    finally:
        process.stdin.close()
        report = json.loads(await asyncio.wait_for(process.stdout.read(), 120))
        await process.wait()
        probes.latencies.extend(report["latencies"])
        probes.errors += report["errors"]


async def _probe_until_stdin_closes(base: str) -> Probes:
    probes, stop = Probes(), asyncio.Event()
    loop = asyncio.get_running_loop()
    waiting = loop.run_in_executor(None, sys.stdin.buffer.read)
    waiting.add_done_callback(lambda _: stop.set())
    await _probe_until(base, stop, probes)
    return probes


def main() -> None:
    probes = asyncio.run(_probe_until_stdin_closes(sys.argv[1]))
    print(json.dumps({"latencies": probes.latencies, "errors": probes.errors}))


if __name__ == "__main__":
    main()

"""The web app in Debian's chromium: first load of the chat page and a long streamed answer.

    python -m bench.web [--tokens 2000] [--rate 100] [--baseline-ref REF | --no-baseline]

One `threadline serve`-like uvicorn process on a fresh embedded PostgreSQL, the fake model of
bench/fake_openai.py on loopback. The same run measures two builds: first, as the baseline,
today's code (`--baseline-ref`, by default where this branch left `main`, exported with
`git archive` and migrated by its own migrations on its own database), then this checkout;
the browser and the measuring code are this checkout's for both. Prints, for each:

- first load of the chat page for a signed-in user (a fresh browser context holding only the
  refresh cookie, so nothing is cached): requests, bytes on the wire (bodies as sent and
  headers; target <= 100 KB) and uncompressed, and time to interactive, from navigation
  start to the message box ready (target <= 1 s);
- one answer of `--tokens` tokens at `--rate` tokens/s streamed into the page: tokens dropped
  or out of order in what the stream showed before `done` (target 0), and the main thread's
  longest task, from the browser's long-task observer, which reports tasks over 50 ms
  (target <= 50 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, async_playwright

from bench.chat_overhead import JWT_SECRET, PASSWORD, UNLIMITED, _redis_url
from bench.common import ROOT, bench_database, free_port, uvicorn_server
from bench.fake_openai import answer_words

LONG_TASKS = """
window.__longTasks = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__longTasks.push(entry.duration);
}).observe({ type: "longtask", buffered: true });
"""


async def _sign_in(browser: Browser, base: str) -> Any:
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(base + "/")
    await page.fill("#email", "bench@example.com")
    await page.fill("#password", PASSWORD)
    await page.click("form.login button[type=submit]")
    await page.wait_for_selector("#message", timeout=60_000)
    state = await context.storage_state()
    await context.close()
    return state


async def _first_load(browser: Browser, base: str, state: Any) -> Any:
    """Measure the load; the storage state after it (the refresh cookie rotates on use)."""
    context = await browser.new_context(storage_state=state)
    page = await context.new_page()
    responses: list[Any] = []
    page.on("response", lambda response: responses.append(response))
    await page.goto(base + "/")
    await page.wait_for_selector("#message:not([disabled])")
    interactive = await page.evaluate("performance.now()")
    await page.wait_for_load_state("networkidle")
    wire = raw = 0
    for response in responses:
        sizes = await response.request.sizes()
        wire += sizes["responseBodySize"] + sizes["responseHeadersSize"]
        with contextlib.suppress(Exception):  # a redirect or an aborted response has no body
            raw += len(await response.body())
    print(
        f"first load: {len(responses)} requests, {wire / 1024:.1f} KB on the wire "
        f"(headers included; target <= 100 KB), {raw / 1024:.1f} KB uncompressed"
    )
    print(f"time to interactive: {interactive:.0f} ms (target <= 1000 ms)")
    state = await context.storage_state()
    await context.close()
    return state


async def _long_answer(browser: Browser, base: str, state: Any, tokens: int) -> None:
    context = await browser.new_context(storage_state=state)
    await context.add_init_script(LONG_TASKS)
    page = await context.new_page()
    await page.goto(base + "/")
    await page.wait_for_selector("#message")
    await page.fill("#message", "Tell me everything.")
    started = time.monotonic()
    await page.keyboard.press("Enter")
    await page.wait_for_selector(".turn:last-of-type[data-status=complete]", timeout=600_000)
    elapsed = time.monotonic() - started
    streamed = await page.evaluate("document.querySelector('.turn:last-of-type').streamedText")
    longest = await page.evaluate("Math.max(0, ...window.__longTasks)")
    expected = [w.strip() for w in answer_words(tokens)]
    got = str(streamed).split()
    dropped = len(set(expected) - set(got))
    in_order = [w for w in got if w in set(expected)]
    reordered = sum(1 for a, b in zip(in_order, expected, strict=False) if a != b)
    print(
        f"{tokens}-token answer in {elapsed:.1f} s: {dropped} dropped, {reordered} out of "
        f"order (target 0); {len(got)} words shown"
    )
    print(
        f"longest main-thread task: "
        f"{'under 50 ms (none reported)' if not longest else f'{longest:.0f} ms'} "
        f"(target <= 50 ms)"
    )
    await context.close()


async def _run(base: str, tokens: int) -> None:
    """Both measurements against the server at `base`."""
    executable = os.environ.get("THREADLINE_TEST_CHROMIUM") or shutil.which("chromium")
    if not executable:
        sys.exit("chromium is missing: apt-get install chromium")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable)
        state = await _sign_in(browser, base)
        state = await _first_load(browser, base, state)
        await _long_answer(browser, base, state, tokens)
        await browser.close()


@contextlib.contextmanager
def _checkout(ref: str | None) -> Iterator[Path]:
    """This checkout, or `ref` exported into a temporary directory."""
    if ref is None:
        yield ROOT
        return
    target = Path(tempfile.mkdtemp(prefix="tl-web-baseline-"))
    try:
        archive = subprocess.run(
            [shutil.which("git") or "git", "archive", "--format=tar", ref],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(target, filter="data")
        yield target
    finally:
        shutil.rmtree(target, ignore_errors=True)


def _build(label: str, code: Path, model_port: int, tokens: int, redis_url: str | None) -> None:
    """Serve the code at `code` on a database of its own (migrated by its own migrations) and
    measure it."""
    print(f"\n== {label} ==", flush=True)
    with bench_database() as owner_url:
        # The schema and the bench user are made by the build's own code.
        subprocess.run(
            [sys.executable, "-c", _PREPARE, owner_url], cwd=code, check=True, env=_env(code)
        )
        env = {
            "DATABASE_URL": owner_url,
            "THREADLINE_JWT_SECRET": JWT_SECRET,
            "THREADLINE_LOG_LEVEL": "WARNING",
            "THREADLINE_LLM": "openai-compatible",
            "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1",
            "OPENAI_API_KEY": "fake",
            "THREADLINE_AGENT_TOOLS": "false",
            "THREADLINE_LLM_MAX_TOKENS": str(tokens + 100),
            "THREADLINE_LLM_TIMEOUT_SECONDS": "600",
            **UNLIMITED,
            **({"REDIS_URL": redis_url} if redis_url else {}),
            **_env(code),
        }
        with uvicorn_server(env, app="app.main:app_factory", cwd=code) as base:
            asyncio.run(_run(base, tokens))


# Run in the build's directory: its `bench.chat_overhead._prepare` with its own `app`.
_PREPARE = (
    "import asyncio, sys; from bench.chat_overhead import _prepare; "
    "asyncio.run(_prepare(sys.argv[1]))"
)


def _env(code: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(code)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=100.0, help="tokens per second")
    parser.add_argument(
        "--baseline-ref",
        default=None,
        help="git ref of today's code (default: where this branch left main)",
    )
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()
    if args.baseline_ref is None:
        args.baseline_ref = subprocess.run(
            [shutil.which("git") or "git", "merge-base", "HEAD", "main"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()[:12]
    builds: list[tuple[str, str | None]] = [("this build", None)]
    if not args.no_baseline:
        builds.insert(0, (f"baseline {args.baseline_ref}", args.baseline_ref))
    model_port = free_port()
    model = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.fake_openai",
            "--port",
            str(model_port),
            "--tokens",
            str(args.tokens),
            "--interval",
            str(1 / args.rate),
        ],
        cwd=ROOT,
    )
    redis_url = _redis_url()
    try:
        for label, ref in builds:
            with _checkout(ref) as code:
                _build(label, code, model_port, args.tokens, redis_url)
    finally:
        model.terminate()
        model.wait(timeout=10)


if __name__ == "__main__":
    main()

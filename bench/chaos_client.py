"""One chaos-benchmark client: a chat stream that survives what a careful client can survive.

It posts `/chat/stream` with its own Idempotency-Key and reads the Server-Sent Events. When
the connection breaks before a terminal event (`done` or `error`), it resumes with
`GET /chat/{turn_id}/stream` and `Last-Event-ID` on the other API process; when it has no turn
id yet, or the stream cannot be resumed (404), it posts the same request again with the same
key. 429 and 5xx answers are retried with backoff, and so is an `error` event without an
`id:` (`too_many_streams`, `resume_unavailable`, `server_shutdown`: the server says resuming
from the same Last-Event-ID misses nothing). Attempts and time are both bounded.

A `Script` adds what some phases' clients do on seeing the answer's last word: press Stop a
random 0..`stop_within` s later (racing the final write), or drop the connection and resume
`resume_after` s later (when the turn has finished and its buffer may have been evicted).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.fake_openai import LAST_WORD

RETRY_STATUSES = {409, 429, 500, 502, 503, 504}
BACKOFF_SECONDS = (0.25, 0.5, 1.0, 2.0, 4.0)
MAX_RETRY_AFTER_SECONDS = 10.0


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["Retry-After"])
    except (KeyError, ValueError):
        return None


@dataclass(frozen=True)
class Script:
    """What a client does beside reading (see the module's docstring)."""

    stop_within: float | None = None
    resume_after: float | None = None


@dataclass
class StreamResult:
    """What one client saw, across all its attempts."""

    index: int
    session_id: str
    key: str
    turn_id: str | None = None
    started: float = 0.0
    first_token_s: float | None = None
    terminal: str | None = None
    """`done` or `error` (the event that ended the stream), else None."""
    error_code: str | None = None
    done_status: str | None = None
    done_turn_ids: set[str] = field(default_factory=set)
    whole_turn_id: str | None = None
    """The turn whose whole answer (its last word) this client received."""
    http_error: int | None = None
    """The last non-200 answer, when the client gave up on one."""
    http_answers: list[tuple[int, str | None]] = field(default_factory=list)
    """Every non-200 answer: its status and its error code (None without one)."""
    stop_answer: str | None = None
    """What Stop was answered: `202 stopping`, `200 stopped`, `409 turn_not_running`..."""
    dropped: bool = False
    text: str = ""
    posts: int = 0
    resumes: int = 0
    breaks: list[str] = field(default_factory=list)
    """Why each attempt ended without a terminal event."""


@dataclass
class _Attempt:
    last_event_id: int = 0
    events: int = 0
    last_word: bool = False
    transient: str | None = None
    """The code of an `error` event without an id: resume, it is not the stream's end."""


def _error_code(body: bytes) -> str | None:
    """The code of a JSON error answer (`{"error": {"code"}}`), else None."""
    try:
        error = json.loads(body).get("error")
        return str(error["code"]) if isinstance(error, dict) and error.get("code") else None
    except (ValueError, AttributeError):
        return None


async def _read_events(
    response: httpx.Response,
    result: StreamResult,
    attempt: _Attempt,
    on_last_word: Callable[[], bool],
) -> None:
    """Parse the SSE stream into `result` until it ends, a terminal event arrives, or
    `on_last_word` (called on each event once the answer's last word is in) says to stop."""
    name, data, event_id = "message", "", None
    async for line in response.aiter_lines():
        if line == "":
            if data:
                _on_event(result, attempt, name, data, event_id)
                if result.terminal is not None or attempt.transient is not None:
                    return
                if attempt.last_word and on_last_word():
                    return
            name, data, event_id = "message", "", None
        elif line.startswith(":") or line.startswith("retry:"):
            continue
        elif line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()


def _on_event(
    result: StreamResult, attempt: _Attempt, name: str, raw: str, event_id: int | None
) -> None:
    if event_id is not None:
        attempt.last_event_id = event_id
    attempt.events += 1
    payload: dict[str, Any] = json.loads(raw)
    if name == "meta" and payload.get("turn_id"):
        result.turn_id = str(payload["turn_id"])
    elif name == "token":
        if result.first_token_s is None:
            result.first_token_s = time.monotonic() - result.started
        result.text += str(payload.get("text", ""))
        if LAST_WORD in result.text:
            attempt.last_word = True
            result.whole_turn_id = result.whole_turn_id or result.turn_id
    elif name == "done":
        result.terminal = "done"
        result.done_status = str(payload.get("status"))
        result.done_turn_ids.add(str(payload.get("turn_id")))
    elif name == "error" and event_id is None:
        attempt.transient = str(payload.get("code"))
    elif name == "error":
        result.terminal = "error"
        result.error_code = str(payload.get("code"))


async def run_client(
    client: httpx.AsyncClient,
    bases: list[str],
    result: StreamResult,
    message: str,
    *,
    max_attempts: int,
    deadline_seconds: float,
    script: Script = Script(),
) -> StreamResult:
    """Drive one stream to a terminal event, or until attempts or time run out."""
    result.started = time.monotonic()
    deadline = result.started + deadline_seconds
    attempt = _Attempt()
    body = {"session_id": result.session_id, "message": message}
    failures = 0
    stopping: list[asyncio.Task[None]] = []

    def on_last_word() -> bool:
        """Press Stop once (reading on), or drop the connection once."""
        if script.stop_within is not None and not stopping:
            other = bases[(result.index + 1) % len(bases)]
            stopping.append(asyncio.create_task(_stop(client, other, result, script.stop_within)))
        if script.resume_after is not None and not result.dropped:
            result.dropped = True
            return True
        return False

    for number in range(max_attempts):
        if result.terminal is not None or time.monotonic() >= deadline:
            break
        base = bases[(result.index + number) % len(bases)]  # the other process each time
        resume = result.turn_id is not None and attempt.last_event_id > 0
        headers = {"Idempotency-Key": result.key}
        if resume:
            url = f"{base}/chat/{result.turn_id}/stream"
            headers = {"Last-Event-ID": str(attempt.last_event_id)}
            result.resumes += 1
        else:
            url = f"{base}/chat/stream"
            result.posts += 1
            # A retried POST replays the whole stream: start the text over.
            result.text, attempt = "", _Attempt()
        remaining = max(1.0, deadline - time.monotonic())
        retry_after, result.http_error, dropped = None, None, result.dropped
        try:
            async with asyncio.timeout(remaining):
                method = "GET" if resume else "POST"
                async with client.stream(
                    method, url, headers=headers, json=None if resume else body
                ) as response:
                    if response.status_code != 200:
                        code = _error_code(await response.aread())
                        result.http_answers.append((response.status_code, code))
                    if response.status_code == 404 and resume:
                        result.breaks.append("resume 404")
                        attempt.last_event_id = 0  # cannot resume: post again, same key
                        continue
                    if response.status_code != 200:
                        result.http_error = response.status_code
                        result.breaks.append(f"HTTP {response.status_code}")
                        if response.status_code not in RETRY_STATUSES:
                            break
                        retry_after = _retry_after(response)
                    else:
                        result.turn_id = response.headers.get("X-Turn-Id") or result.turn_id
                        await _read_events(response, result, attempt, on_last_word)
                        if result.terminal is None and result.dropped and not dropped:
                            result.breaks.append("dropped by the client")
                        elif attempt.transient is not None:
                            result.breaks.append(f"error {attempt.transient} (no id)")
                            attempt.transient = None
                        elif result.terminal is None:
                            result.breaks.append("ended without a terminal event")
        except TimeoutError:
            result.breaks.append("client deadline")
            break
        except (httpx.HTTPError, json.JSONDecodeError, ValueError) as exc:
            result.breaks.append(type(exc).__name__)
        if result.terminal is None and result.dropped and not dropped:
            # Closed: resume once the turn has finished and its buffer has gone cold.
            await asyncio.sleep(
                min(script.resume_after or 0.0, max(0.0, deadline - time.monotonic()))
            )
        elif result.terminal is None:
            failures += 1
            delay = BACKOFF_SECONDS[min(failures, len(BACKOFF_SECONDS)) - 1]
            if retry_after is not None:
                delay = min(retry_after, MAX_RETRY_AFTER_SECONDS)
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
    await asyncio.gather(*stopping)
    return result


async def _stop(client: httpx.AsyncClient, base: str, result: StreamResult, within: float) -> None:
    """Press Stop 0..`within` s from now; record what it was answered."""
    # Seeded by the client: a rerun presses at the same moments.
    await asyncio.sleep(random.Random(result.index).uniform(0.0, within))  # noqa: S311
    try:
        response = await client.post(f"{base}/chat/{result.turn_id}/stop")
    except httpx.HTTPError as exc:
        result.stop_answer = type(exc).__name__
        return
    try:
        words = response.json().get("status") or _error_code(response.content)
    except (ValueError, AttributeError):
        words = None
    result.stop_answer = f"{response.status_code} {words}"

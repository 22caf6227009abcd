"""Redis under load and faults, on a private redis-server: a pool smaller than the load, a
restart, connections cut mid-stream, and the one degradation allowed (Redis down)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from app.config import Settings
from app.conversation.durability.idempotency import Claim, IdempotencyStore, IdempotencyUnavailable
from app.conversation.streaming.buffer import BufferedEvent, StreamBuffer
from app.core.errors import ServiceUnavailable, TooManyRequests
from app.core.redis import RedisHandle, build_redis
from app.limits.limiter import Limits, Reservation, UsageLimiter
from tests.private_redis import PrivateRedis, private_redis

TOKENS = 20


@pytest.fixture
def server() -> Iterator[PrivateRedis]:
    with private_redis() as running:
        yield running


def _settings(server: PrivateRedis, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "redis_url": server.url,
        "redis_prefix": f"tl-test-{uuid.uuid4().hex[:8]}:",
        **overrides,
    }
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
async def handle(server: PrivateRedis) -> AsyncIterator[RedisHandle]:
    redis = build_redis(_settings(server, redis_max_connections=4))
    yield redis
    await redis.close()


async def _exists(_turn: uuid.UUID) -> bool:
    return True


def _store(redis: RedisHandle) -> IdempotencyStore:
    return IdempotencyStore(redis, ttl_seconds=3600, running_ttl_seconds=120)


async def _claim(store: IdempotencyStore, key: str) -> Claim | None:
    return await store.claim(uuid.uuid4(), uuid.uuid4(), key, "print", uuid.uuid4(), _exists)


async def _write_stream(buffer: StreamBuffer, count: int) -> list[BufferedEvent]:
    turn_id = uuid.uuid4()
    writer = buffer.writer(turn_id, f"{uuid.uuid4()}:{uuid.uuid4()}")
    for event_id in range(1, count + 1):
        writer.append(event_id, "token", {"text": f"t{event_id}"})
        await asyncio.sleep(0)  # as a model streams: the writer drains between tokens
    writer.close()
    await asyncio.wait_for(writer.task, 60)
    assert not writer.failed
    return await buffer.read_after(turn_id, 0)


async def test_more_concurrent_operations_than_the_pool_holds_wait_for_a_connection(
    server: PrivateRedis, handle: RedisHandle
) -> None:
    buffer, store = StreamBuffer(handle, 600), _store(handle)
    claims, streams = await asyncio.gather(
        asyncio.gather(*(_claim(store, f"key-{i}") for i in range(50))),
        asyncio.gather(*(_write_stream(buffer, 5) for _ in range(50))),
    )
    assert all(claim is not None and claim.won for claim in claims)
    for events in streams:
        assert [e.event_id for e in events] == [1, 2, 3, 4, 5]
    assert server.client_count() <= 4  # the pool's size held: the rest waited their turn


async def test_a_claim_or_limit_check_redis_cannot_serve_in_time_is_refused_not_skipped(
    server: PrivateRedis,
) -> None:
    settings = _settings(server, redis_max_connections=2, redis_pool_timeout_seconds=0.2)
    redis = build_redis(settings)
    limiter = UsageLimiter(redis, settings)
    pool = redis.client.connection_pool
    held = [await pool.get_connection() for _ in range(2)]  # type: ignore[no-untyped-call]
    try:
        with pytest.raises(IdempotencyUnavailable) as refused:
            await _claim(_store(redis), "busy")
        assert refused.value.status_code == 503
        assert refused.value.headers == {"Retry-After": "1"}
        with pytest.raises(ServiceUnavailable) as limited:
            await limiter.admit(uuid.uuid4(), uuid.uuid4(), Limits(1, 1, 1, 1))
        assert limited.value.code == "limits_unavailable"
    finally:
        for connection in held:
            await pool.release(connection)
        await redis.close()


async def test_only_a_redis_that_is_down_lets_requests_through_unchecked(
    server: PrivateRedis, handle: RedisHandle
) -> None:
    limiter = UsageLimiter(handle, _settings(server))
    server.stop()
    assert await _claim(_store(handle), "down") is None  # the documented degradation
    await limiter.admit(uuid.uuid4(), uuid.uuid4(), Limits(1, 1, 1, 1))
    assert not await handle.ping()


@pytest.mark.parametrize("fault", ["restart", "cut_connections", "down_for_a_moment"])
async def test_a_buffer_writer_survives_a_fault_mid_stream_and_the_buffer_ends_complete(
    server: PrivateRedis, handle: RedisHandle, fault: str
) -> None:
    buffer = StreamBuffer(handle, 600)
    turn_id = uuid.uuid4()
    writer = buffer.writer(turn_id, f"{uuid.uuid4()}:{uuid.uuid4()}")
    for event_id in range(1, TOKENS // 2 + 1):
        writer.append(event_id, "token", {"text": f"t{event_id}"})
    for _ in range(200):  # the first half has reached Redis
        last = await buffer.last_event(turn_id)
        if last is not None and last.event_id == TOKENS // 2:
            break
        await asyncio.sleep(0.01)
    if fault == "restart":
        server.restart()
    elif fault == "cut_connections":
        assert server.kill_clients() >= 1
    else:
        server.stop()
    for event_id in range(TOKENS // 2 + 1, TOKENS):
        writer.append(event_id, "token", {"text": f"t{event_id}"})
    if fault == "down_for_a_moment":
        await asyncio.sleep(0.5)  # the writer's attempts meet a Redis that is not there
        server.start()
    writer.append(TOKENS, "done", {"status": "complete"})
    writer.close()
    await asyncio.wait_for(writer.task, 60)

    events = await buffer.read_after(turn_id, 0)
    assert [e.event_id for e in events] == list(range(1, TOKENS + 1))
    assert [e.data.get("text") for e in events[:-1]] == [f"t{i}" for i in range(1, TOKENS)]
    assert events[-1].name == "done"
    assert not writer.failed
    assert await buffer.owner(turn_id) is not None


async def test_the_first_operations_after_a_restart_work(
    server: PrivateRedis, handle: RedisHandle
) -> None:
    settings = _settings(server)
    limiter = UsageLimiter(handle, settings)
    store = _store(handle)
    await asyncio.gather(*(_claim(store, f"warm-{i}") for i in range(20)))  # a full pool
    server.restart()

    claims = await asyncio.gather(*(_claim(store, f"after-{i}") for i in range(20)))
    assert all(claim is not None and claim.won for claim in claims)  # none ran without its key
    assert await handle.ping()

    await asyncio.gather(*(_claim(store, f"warm-again-{i}") for i in range(20)))
    server.restart()
    tenant_id, user_id = uuid.uuid4(), uuid.uuid4()
    limits = Limits(
        user_per_min=5, tenant_per_min=0, user_tokens_per_day=0, tenant_tokens_per_day=0
    )
    admitted = await asyncio.gather(
        *(limiter.admit(tenant_id, user_id, limits) for _ in range(10)), return_exceptions=True
    )
    assert sum(isinstance(a, Reservation) for a in admitted) == 5
    assert all(isinstance(a, TooManyRequests) for a in admitted if not isinstance(a, Reservation))


async def test_a_retry_waiting_for_the_first_answer_is_told_what_it_found(
    server: PrivateRedis, handle: RedisHandle
) -> None:
    """`wait_finished` says why it stopped: the answer, a release, a Redis that is down, or a
    turn still running when the time was up (never inferred from the time it took)."""
    store = _store(handle)
    first = await _claim(store, "waited")
    assert first is not None and first.won
    waiter = Claim(first.key, False, first.record)

    assert (await store.wait_finished(waiter, 0.2)).state == "running"

    finished = {**first.record, "state": "done", "response": {"answer": "42"}}
    setter = asyncio.get_running_loop().call_later(
        0.1, lambda: asyncio.ensure_future(handle.client.set(first.key, json.dumps(finished)))
    )
    done = await store.wait_finished(waiter, 5)
    setter.cancel()
    assert (done.state, done.record) == ("done", finished)

    await handle.client.delete(first.key)
    assert (await store.wait_finished(waiter, 5)).state == "released"

    second = await _claim(store, "waited-again")
    assert second is not None
    server.stop()
    down = await store.wait_finished(Claim(second.key, False, second.record), 5)
    assert down.state == "unavailable"


async def test_a_claim_lives_an_admission_until_its_turn_is_recorded_then_a_turn(
    handle: RedisHandle,
) -> None:
    store = IdempotencyStore(handle, ttl_seconds=3600, running_ttl_seconds=120, admission_seconds=1)
    recorded = await _claim(store, "recorded")
    assert recorded is not None and recorded.won
    assert await handle.client.ttl(recorded.key) == 1
    await store.confirm(recorded)
    assert 1 < await handle.client.ttl(recorded.key) <= 120

    tenant, user = uuid.uuid4(), uuid.uuid4()
    lapsed = await store.claim(tenant, user, "lapsed", "print", uuid.uuid4(), _exists)
    assert lapsed is not None and lapsed.won
    await asyncio.sleep(1.5)  # its process was too slow (or died): the key is free
    retry = await store.claim(tenant, user, "lapsed", "print", uuid.uuid4(), _exists)
    assert retry is not None and retry.won and retry.key == lapsed.key
    with pytest.raises(IdempotencyUnavailable):
        await store.confirm(lapsed)  # its admission rolls back: the retry runs the request
    assert json.loads(await handle.client.get(retry.key) or "") == retry.record


async def test_held_claims_are_renewed_only_while_their_turns_run(handle: RedisHandle) -> None:
    store = IdempotencyStore(handle, ttl_seconds=3600, running_ttl_seconds=3, admission_seconds=1)
    running, ended = await _claim(store, "running"), await _claim(store, "ended")
    assert running is not None and ended is not None
    await store.confirm(running)
    await store.confirm(ended)
    await asyncio.sleep(1.1)
    await store.renew_held({running.turn_id})  # the other turn's run has ended
    assert await handle.client.ttl(running.key) == 3
    assert 0 < await handle.client.ttl(ended.key) <= 2  # still there, not renewed

    await handle.client.set(running.key, "a newer claim")  # it lapsed and was claimed again
    await store.renew_held({running.turn_id})
    assert await handle.client.ttl(running.key) == -1  # left as the newer claim set it

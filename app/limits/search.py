"""Searches per user per minute: `/kb/search` and MCP's `search_knowledge` (issue 33).

A search costs an embedding and two index scans; without a bound, one member could keep the
database and the embedder busy for everyone. Counted in Redis in fixed one-minute windows, as
the chat limits are (`limiter.py`), and failing the same way: Redis down (no connection can
be opened) admits, Redis answering but the count failing is a 503, never a search let through
unchecked.
"""

from __future__ import annotations

import logging
import time
import uuid

from redis.exceptions import RedisError

from app.core.errors import ServiceUnavailable, TooManyRequests
from app.core.redis import RedisHandle
from app.observability import metrics

logger = logging.getLogger(__name__)


async def admit_search(redis: RedisHandle, user_id: uuid.UUID, per_minute: int) -> None:
    """Count one search of the user's; 429 past `per_minute` this minute (0: unlimited)."""
    if not per_minute:
        return
    now = time.time()
    key = redis.key("rl", "search", user_id, int(now // 60))
    try:
        async with redis.client.pipeline(transaction=False) as pipe:
            pipe.incr(key)
            pipe.expire(key, 61)
            count, _ = await pipe.execute()
    except (RedisError, OSError):
        if await redis.reachable():
            raise ServiceUnavailable(
                "Search limits could not be checked just now; retry shortly.",
                code="limits_unavailable",
                headers={"Retry-After": "1"},
            ) from None
        logger.warning("Redis is down: searching without limits")
        return
    if int(count) > per_minute:
        metrics.LIMIT_REJECTIONS.labels(scope="user", kind="searches").inc()
        raise TooManyRequests(
            "Too many searches; retry in a minute.",
            code="rate_limited",
            headers={"Retry-After": str(int(60 - now % 60) + 1)},
        )

"""Short-lived marks of erased users and sessions, so a turn still running when its user is
erased does not write their data back to Redis after the purge.

The erasure sets the marks before it stops the user's turns and deletes anything; the writers
that may run after it (idempotency record, stream buffer, quota count, history snapshot) check
them. The key holds a hash of the id, not the id: the purge and the "nothing names the user"
checks look for raw ids, and the mark itself names nobody.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable

from app.core.redis import RedisHandle

logger = logging.getLogger(__name__)

# Longer than any turn may still run after its user was erased (the LLM timeout is far lower).
MARK_TTL_SECONDS = 900


def mark_key(redis: RedisHandle, some_id: uuid.UUID | str) -> str:
    """The Redis key marking an id as erased (holding its hash, not the id)."""
    return redis.key("erased", hashlib.sha256(str(some_id).encode()).hexdigest())


async def mark_erased(redis: RedisHandle, ids: Iterable[uuid.UUID | str]) -> None:
    """Mark users or sessions as erased for a while; a Redis failure is logged, not raised."""
    try:
        async with redis.client.pipeline(transaction=False) as pipe:
            for some_id in ids:
                pipe.set(mark_key(redis, some_id), 1, ex=MARK_TTL_SECONDS)
            await pipe.execute()
    except Exception:
        logger.warning("could not mark an erasure in Redis", exc_info=True)


async def is_erased(redis: RedisHandle, some_id: uuid.UUID | str) -> bool:
    """Whether an id was marked erased recently (False when Redis cannot say)."""
    try:
        return bool(await redis.client.exists(mark_key(redis, some_id)))
    except Exception:
        return False

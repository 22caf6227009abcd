"""The Redis client, built in lifespan. Without `REDIS_URL`, an in-process stand-in.

The stand-in (fakeredis) speaks the same protocol subset inside the process, so the embedded
default needs no Redis server; state is then per process, which is fine for one `serve`.
Real Redis gets short timeouts: when it is down, callers degrade instead of hanging.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from app.config import Settings


@dataclass
class RedisHandle:
    client: Redis
    in_process: bool
    prefix: str

    def key(self, *parts: object) -> str:
        return self.prefix + ":".join(str(part) for part in parts)

    async def ping(self) -> bool:
        try:
            return bool(await self.client.ping())
        except Exception:  # any transport failure means "down"
            return False

    async def close(self) -> None:
        await self.client.aclose()


def build_redis(settings: Settings) -> RedisHandle:
    if settings.redis_url:
        client = Redis.from_url(
            settings.redis_url,
            socket_connect_timeout=1.0,
            socket_timeout=1.0,
            health_check_interval=30,
        )
        return RedisHandle(client=client, in_process=False, prefix=settings.redis_prefix)
    import fakeredis

    return RedisHandle(
        client=fakeredis.FakeAsyncRedis(), in_process=True, prefix=settings.redis_prefix
    )

"""Login throttling: failed attempts per e-mail and per client address, counted in Redis.

Without it, passwords could be guessed at the speed of argon2 and the hashing itself used to
exhaust the server. When Redis is down the throttle is skipped (logged), not the login.
"""

from __future__ import annotations

import hashlib
import logging

from app.core.errors import TooManyRequests
from app.core.redis import RedisHandle

logger = logging.getLogger(__name__)


class LoginThrottle:
    def __init__(self, redis: RedisHandle, *, max_failures: int, window_seconds: int) -> None:
        self.redis = redis
        self.max_failures = max_failures
        self.window = window_seconds

    def _keys(self, email: str, client: str | None) -> list[str]:
        # The e-mail hashed: a key must not hold personal data an erasure would have to find.
        digest = hashlib.sha256(email.strip().lower().encode()).hexdigest()
        keys = [self.redis.key("login-failures", "email", digest)]
        if client:
            keys.append(self.redis.key("login-failures", "client", client))
        return keys

    async def check(self, email: str, client: str | None) -> None:
        """Refuse (429) while the e-mail or the client has too many recent failures."""
        try:
            for key, limit in zip(
                self._keys(email, client), (self.max_failures, self.max_failures * 5), strict=False
            ):
                failures = int(await self.redis.client.get(key) or 0)
                if failures >= limit:
                    retry = max(1, int(await self.redis.client.ttl(key)))
                    raise TooManyRequests(
                        "Too many failed logins; try again later.",
                        code="login_throttled",
                        headers={"Retry-After": str(retry)},
                    )
        except TooManyRequests:
            raise
        except Exception:
            logger.warning("login throttle unavailable", exc_info=True)

    async def failed(self, email: str, client: str | None) -> None:
        try:
            for key in self._keys(email, client):
                async with self.redis.client.pipeline(transaction=True) as pipe:
                    pipe.incr(key)
                    pipe.expire(key, self.window, nx=True)
                    await pipe.execute()
        except Exception:
            logger.warning("login throttle unavailable", exc_info=True)

    async def succeeded(self, email: str) -> None:
        try:
            await self.redis.client.delete(self._keys(email, None)[0])
        except Exception:
            logger.warning("login throttle unavailable", exc_info=True)

"""Login throttling: failed attempts per e-mail and per client address, counted in Redis.

Without it, passwords could be guessed at the speed of argon2 and the hashing itself used to
exhaust the server. When Redis is down the throttle is skipped (logged), not the login.

An attempt takes its slot before the password is checked, in one Lua script over both
counters (`reserve`): checking first and counting after let 40 parallel guesses all through
a limit of 10, since each read the count before any had written it. The slot stays taken if
the password was wrong, and is given back when it was right (`succeeded`).
"""

from __future__ import annotations

import hashlib
import logging

from app.core.errors import TooManyRequests
from app.core.redis import RedisHandle

logger = logging.getLogger(__name__)

# KEYS: the counters; ARGV[1]: window seconds, ARGV[1 + i]: the limit of KEYS[i].
# Returns 0 when admitted (every counter counted), else the TTL of the first counter over its
# limit, with nothing counted: a refused attempt checks no password, so it is no failure.
_RESERVE = """
local counts = {}
for i = 1, #KEYS do
  counts[i] = redis.call('INCR', KEYS[i])
  if counts[i] == 1 then redis.call('EXPIRE', KEYS[i], ARGV[1]) end
end
for i = 1, #KEYS do
  if counts[i] > tonumber(ARGV[i + 1]) then
    for j = 1, #KEYS do redis.call('DECR', KEYS[j]) end
    local ttl = redis.call('TTL', KEYS[i])
    if ttl < 1 then ttl = 1 end
    return ttl
  end
end
return 0
"""

# A successful login clears the e-mail's failures and gives its slot back to the client.
_RELEASE = """
redis.call('DEL', KEYS[1])
if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 and tonumber(redis.call('GET', KEYS[2])) > 0
then redis.call('DECR', KEYS[2]) end
return 1
"""


class LoginThrottle:
    """Limits failed logins per e-mail and per client address, in Redis."""

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

    async def reserve(self, email: str, client: str | None) -> None:
        """Count this attempt against the e-mail and the client, or refuse it (429) when
        either has used up its failures in the window. Call before checking the password."""
        keys = self._keys(email, client)
        limits = (self.max_failures, self.max_failures * 5)[: len(keys)]
        try:
            retry = int(
                await self.redis.client.eval(_RESERVE, len(keys), *keys, self.window, *limits)
            )
        except Exception:
            logger.warning("login throttle unavailable", exc_info=True)
            return
        if retry:
            raise TooManyRequests(
                "Too many failed logins; try again later.",
                code="login_throttled",
                headers={"Retry-After": str(retry)},
            )

    async def succeeded(self, email: str, client: str | None) -> None:
        """The password was right: this attempt was no failure."""
        try:
            keys = self._keys(email, client)
            await self.redis.client.eval(_RELEASE, len(keys), *keys)
        except Exception:
            logger.warning("login throttle unavailable", exc_info=True)

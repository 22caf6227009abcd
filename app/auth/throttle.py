"""Login throttling: failed attempts per e-mail and client address, counted in Redis.

Without it, passwords could be guessed at the speed of argon2 and the hashing itself used to
exhaust the server. It fails closed, as the usage limiter does (docs/adr/0015): when Redis
answers but the count fails (no pooled connection free in time, say), the login is a 503
with `Retry-After`, never an unchecked guess; when Redis is down (no connection can be
opened), this process counts on its own (`LocalCounters`), so guessing stays throttled per
process and people can still sign in. It used to skip the throttle on any Redis error: with
the pool drained by other requests, 15 wrong passwords in a row were all checked (issue 33).

An attempt takes its slot before the password is checked, in one Lua script over both
counters at once (`reserve`): checking first and counting after let 40 parallel guesses all through
a limit of 10, since each read the count before any had written it. The slot stays taken if
the password was wrong, and is given back when it was right (`succeeded`).
"""

from __future__ import annotations

import hashlib
import logging
import time

from app.core.errors import ServiceUnavailable, TooManyRequests
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

# A successful login clears the failures of its e-mail from its address, and gives its slot
# back to the address and to the e-mail's total.
_RELEASE = """
redis.call('DEL', KEYS[1])
for i = 2, #KEYS do
  if tonumber(redis.call('GET', KEYS[i]) or '0') > 0 then redis.call('DECR', KEYS[i]) end
end
return 1
"""


class LocalCounters:
    """This process's failure counters while Redis is down: the same fixed windows as the
    Lua scripts, in memory, bounded (past `max_keys` live counters, attempts are refused)."""

    def __init__(self, max_keys: int = 100_000) -> None:
        self.max_keys = max_keys
        self._counts: dict[str, tuple[int, float]] = {}  # key: (count, window end)

    def _live(self, key: str, now: float) -> int:
        count, ends = self._counts.get(key, (0, 0.0))
        return count if ends > now else 0

    def reserve(self, keys: list[str], limits: tuple[int, ...], window: int) -> int:
        """0 when admitted (every counter counted), else the seconds until the first counter
        over its limit frees a slot; as `_RESERVE` does in Redis."""
        now = time.monotonic()
        if len(self._counts) >= self.max_keys:
            self._counts = {k: v for k, v in self._counts.items() if v[1] > now}
            if len(self._counts) >= self.max_keys:
                return window  # too many distinct guessers to count: nobody is let through
        for key, limit in zip(keys, limits, strict=True):
            if self._live(key, now) + 1 > limit:
                return max(1, int(self._counts[key][1] - now))
        for key in keys:
            count = self._live(key, now)
            ends = self._counts[key][1] if count else now + window
            self._counts[key] = (count + 1, ends)
        return 0

    def release(self, keys: list[str]) -> None:
        """A successful login, as `_RELEASE` does: the first counter cleared, a slot given
        back to the others."""
        self._counts.pop(keys[0], None)
        for key in keys[1:]:
            count, ends = self._counts.get(key, (0, 0.0))
            if count > 0:
                self._counts[key] = (count - 1, ends)


LOCAL_COUNTERS = LocalCounters()
"""The process's counters for when Redis is down."""


class LoginThrottle:
    """Limits failed logins per e-mail and per client address, in Redis."""

    def __init__(
        self,
        redis: RedisHandle,
        *,
        max_failures: int,
        window_seconds: int,
        local: LocalCounters = LOCAL_COUNTERS,
    ) -> None:
        self.redis = redis
        self.max_failures = max_failures
        self.window = window_seconds
        self.local = local
        self._counted_locally = False

    def _keys(self, email: str, client: str | None) -> tuple[list[str], tuple[int, ...]]:
        """The counters an attempt counts against, and their limits: the e-mail from this
        address (`max_failures`), the address whatever the e-mail (5x), and the e-mail from
        every address (10x). Counting the e-mail alone let anyone lock its owner out for the
        window with 10 guesses (issue 33); now a guesser locks out only their own address,
        and a guessing botnet still meets the e-mail's total."""
        # The e-mail hashed: a key must not hold personal data an erasure would have to find.
        digest = hashlib.sha256(email.strip().lower().encode()).hexdigest()
        everywhere = self.redis.key("login-failures", "email", digest)
        if not client:
            return [everywhere], (self.max_failures,)
        keys = [
            self.redis.key("login-failures", "pair", digest, client),
            self.redis.key("login-failures", "client", client),
            everywhere,
        ]
        return keys, (self.max_failures, self.max_failures * 5, self.max_failures * 10)

    async def reserve(self, email: str, client: str | None) -> None:
        """Count this attempt against the e-mail and the client (`_keys`), or refuse it (429)
        when one of them has used up its failures in the window. Call before checking the
        password. 503 when Redis answers but the count failed."""
        keys, limits = self._keys(email, client)
        try:
            retry = int(
                await self.redis.client.eval(_RESERVE, len(keys), *keys, self.window, *limits)
            )
        except Exception:
            if await self.redis.reachable():
                logger.warning("login throttle failed though Redis answers", exc_info=True)
                raise ServiceUnavailable(
                    "Sign-in is unavailable for a moment; retry shortly.",
                    code="login_unavailable",
                    headers={"Retry-After": "1"},
                ) from None
            logger.warning("Redis is down: login failures counted by this process")
            retry = self.local.reserve(keys, limits, self.window)
            self._counted_locally = True
        if retry:
            raise TooManyRequests(
                "Too many failed logins; try again later.",
                code="login_throttled",
                headers={"Retry-After": str(retry)},
            )

    async def succeeded(self, email: str, client: str | None) -> None:
        """The password was right: this attempt was no failure."""
        keys, _ = self._keys(email, client)
        if self._counted_locally:
            self.local.release(keys)
            return
        try:
            await self.redis.client.eval(_RELEASE, len(keys), *keys)
        except Exception:  # the attempt stays counted as a failure: harmless
            logger.warning("login throttle could not release a slot", exc_info=True)

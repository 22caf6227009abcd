"""Requests per minute and model tokens per day, per user and per tenant, counted in Redis.

Both checks happen before the model is called: the user's first with the turn's token
reservation (one script, so checking and reserving are one atomic step), then the tenant's
minute counter (a second round trip, only for requests the user's limits admit; a request the
tenant refuses is not counted, and gives its reservation back). The minute counters are fixed
windows (INCR + EXPIRE). The token counters hold, for today (UTC), what finished turns used
plus what running turns reserved: a turn is admitted while the counter is below the quota and
reserves its expected tokens at once, so concurrent turns see each other; when it ends (done,
failed, stopped or cancelled) the reservation is replaced by what it used (docs/adr/0049).
A tenant's `settings["limits"]` overrides the defaults from the environment
(`THREADLINE_RATE_LIMIT_*`, `THREADLINE_TOKEN_QUOTA_*`); 0 means unlimited. Redis down (no
connection can be opened): no limits (chat keeps answering; `/readyz` reports Redis). Redis
answering but a check failing (no pooled connection free in time, say) is a 503 with
`Retry-After`, never a request let through unchecked (docs/adr/0015).

Cached prompt tokens (read from the provider's prompt cache) count for a share of a token:
`THREADLINE_CACHED_TOKEN_RATIO`, by default the provider's own price ratio (ADR 0035).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.core.errors import ServiceUnavailable, TooManyRequests
from app.core.redis import RedisHandle
from app.core.tenant_cache import TenantCache
from app.observability import metrics
from app.pii.marks import mark_key
from app.tenants.repository import tenant_settings

logger = logging.getLogger(__name__)

DAY_SECONDS = 86_400
# A turn's tokens are counted with a few retries while Redis answers (0.1 s, 0.2 s, ...): the
# client's own retries cover a dead connection; these cover a pool busy for a moment.
CHARGE_ATTEMPTS = 5

# A finished turn's tokens (or what it used less its reservation), added to the user's and
# the tenant's day, never below zero — unless the user was erased while the turn ran (no key
# may name them again): one round trip.
_CHARGE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for i = 2, #KEYS do
  if redis.call('INCRBY', KEYS[i], ARGV[1]) < 0 then redis.call('SET', KEYS[i], 0) end
  redis.call('EXPIRE', KEYS[i], ARGV[2])
end
return 1
"""

# Admission of a turn by the user's limits, and its reservation, as one atomic step: count the
# request in the user's minute; refuse (and reserve nothing) when the user's or the tenant's
# day counter has reached its quota or the user's minute is over its limit; else add the
# reservation to both day counters. KEYS: user minute, user day, tenant day. ARGV: user per
# minute, user quota, tenant quota, tokens to reserve, the day counters' TTL.
_ADMIT = """
local count = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], 61)
local user = tonumber(redis.call('GET', KEYS[2]) or '0')
local tenant = tonumber(redis.call('GET', KEYS[3]) or '0')
local per_min, user_quota, tenant_quota = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if user_quota > 0 and user >= user_quota then return {1, count} end
if per_min > 0 and count > per_min then return {2, count} end
if tenant_quota > 0 and tenant >= tenant_quota then return {3, count} end
for i = 2, 3 do
  redis.call('INCRBY', KEYS[i], ARGV[4])
  redis.call('EXPIRE', KEYS[i], ARGV[5])
end
return {0, count}
"""


PROVIDER_CACHED_RATIO = {"openai": 0.5, "openai-compatible": 0.5, "anthropic": 0.1}
"""What a cached prompt token costs against a fresh one: OpenAI bills cached input at half
price (gpt-4o, gpt-4o-mini; less on newer models), Anthropic cache reads at a tenth."""


def cached_token_ratio(settings: Settings) -> float:
    """The configured ratio, else the provider's (1.0: no discount, e.g. extractive)."""
    if settings.cached_token_ratio is not None:
        return settings.cached_token_ratio
    return PROVIDER_CACHED_RATIO.get(settings.llm, 1.0)


def chargeable_tokens(usage: Mapping[str, Any], ratio: float) -> int:
    """A turn's tokens as the quota counts them: cached prompt tokens at `ratio`."""
    total = int(usage.get("total_tokens", usage.get("completion_tokens", 0)) or 0)
    cached = min(int(usage.get("cached_prompt_tokens", 0) or 0), total)
    return total - cached + math.ceil(cached * ratio)


@dataclass(frozen=True)
class Limits:
    """Per-minute request and per-day token limits for users and tenants (0: unlimited)."""

    user_per_min: int
    tenant_per_min: int
    user_tokens_per_day: int
    tenant_tokens_per_day: int

    @classmethod
    def defaults(cls, settings: Settings) -> Limits:
        """The limits from the environment."""
        return cls(
            settings.rate_limit_user_per_min,
            settings.rate_limit_tenant_per_min,
            settings.token_quota_user_per_day,
            settings.token_quota_tenant_per_day,
        )

    def overridden(self, overrides: dict[str, int]) -> Limits:
        """These limits with a tenant's known overrides applied."""
        known = {k: int(v) for k, v in overrides.items() if k in self.__dataclass_fields__}
        return replace(self, **known)


@dataclass(frozen=True)
class Reservation:
    """Tokens a turn holds against the day's counters from admission until it settles, and
    the counters holding them (the day of admission, even if the turn ends the next)."""

    user_day: str
    tenant_day: str
    tokens: int


def reservation_tokens(settings: Settings) -> int:
    """What a turn reserves at admission: the setting, else the most one model call of a turn
    may use (its prompt budget and its answer)."""
    if settings.token_reservation_per_turn is not None:
        return settings.token_reservation_per_turn
    return settings.context_max_tokens + settings.llm_max_tokens


class UsageLimiter:
    """Checks and charges the rate limits and token quotas in Redis."""

    def __init__(self, redis: RedisHandle, settings: Settings) -> None:
        self.redis = redis
        self.defaults = Limits.defaults(settings)
        self.cached_ratio = cached_token_ratio(settings)
        self.cache_seconds = settings.tenant_policy_cache_seconds
        self.reservation = reservation_tokens(settings)
        self._overrides: TenantCache[dict[str, int]] = TenantCache()
        self._charge = redis.client.register_script(_CHARGE)
        self._admit = redis.client.register_script(_ADMIT)

    async def limits_for(self, db: AsyncSession, tenant_id: uuid.UUID) -> Limits:
        """The tenant's limits; its overrides are cached briefly, like its other settings."""
        overrides = self._overrides.get(tenant_id)
        if overrides is None:
            stored = await tenant_settings(db, tenant_id)
            overrides = dict(stored.get("limits") or {})
            self._overrides.put(tenant_id, overrides, self.cache_seconds)
        return self.defaults.overridden(overrides)

    def _keys(self, tenant_id: uuid.UUID, user_id: uuid.UUID, now: float) -> dict[str, str]:
        minute, day = int(now // 60), int(now // DAY_SECONDS)
        return {
            "user_min": self.redis.key("rl", "u", user_id, minute),
            "tenant_min": self.redis.key("rl", "t", tenant_id, minute),
            "user_day": self.redis.key("quota", "u", user_id, day),
            "tenant_day": self.redis.key("quota", "t", tenant_id, day),
        }

    async def admit(
        self, tenant_id: uuid.UUID, user_id: uuid.UUID, limits: Limits
    ) -> Reservation | None:
        """Count this request and reserve its expected tokens; 429 if over a rate limit or a
        token quota. None: Redis is down, admitted unchecked (and charged when it ends).

        The user's limits are checked first and the tenant's minute counter is counted only
        for a request the user's limits admit (and given back when the tenant's refuses it):
        one user over their limit must not use up the budget of everyone in the tenant.
        """
        now = time.time()
        keys = self._keys(tenant_id, user_id, now)
        reservation = Reservation(keys["user_day"], keys["tenant_day"], self.reservation)
        try:
            refused, count = await self._admit(
                keys=[keys["user_min"], keys["user_day"], keys["tenant_day"]],
                args=[
                    limits.user_per_min,
                    limits.user_tokens_per_day,
                    limits.tenant_tokens_per_day,
                    reservation.tokens,
                    2 * DAY_SECONDS,
                ],
            )
        except (RedisError, OSError):
            await self._unavailable()
            return None
        if refused == 1:
            _refuse_quota("user", now)
        if refused == 2:
            _check_rate("user", int(count), limits.user_per_min, now)
        if refused == 3:
            _refuse_quota("tenant", now)
        if not limits.tenant_per_min:
            return reservation
        try:
            try:
                async with self.redis.client.pipeline(transaction=False) as pipe:
                    pipe.incr(keys["tenant_min"])
                    pipe.expire(keys["tenant_min"], 61)
                    tenant_count, _ = await pipe.execute()
                if int(tenant_count) > limits.tenant_per_min:
                    await self.redis.client.decr(keys["tenant_min"])  # refused: not counted
            except (RedisError, OSError):
                await self._unavailable()
                return reservation
            _check_rate("tenant", int(tenant_count), limits.tenant_per_min, now)
        except BaseException:
            await self.release(user_id, reservation)
            raise
        return reservation

    async def _unavailable(self) -> None:
        """A check failed: admitted unchecked only when Redis is down, else 503."""
        if await self.redis.reachable():
            logger.warning("rate limits not checked though Redis answers", exc_info=True)
            raise ServiceUnavailable(
                "Usage limits could not be checked just now; retry shortly.",
                code="limits_unavailable",
                headers={"Retry-After": "1"},
            )
        logger.warning("Redis is down: admitting without limits")

    async def settle(
        self,
        tenant_id: uuid.UUID,
        user_id: uuid.UUID,
        reservation: Reservation | None,
        tokens: int,
    ) -> None:
        """A turn has ended having used `tokens`: its reservation is replaced by them (the
        difference refunded, or added when it used more). Without one (admitted while Redis
        was down), they are added to today's counters."""
        if reservation is None:
            keys = self._keys(tenant_id, user_id, time.time())
            reservation = Reservation(keys["user_day"], keys["tenant_day"], 0)
        delta = max(tokens, 0) - reservation.tokens
        if delta:
            await self._add(user_id, (reservation.user_day, reservation.tenant_day), delta)

    async def release(self, user_id: uuid.UUID, reservation: Reservation | None) -> None:
        """Give back the reservation of a turn that never ran; never raises (it runs while an
        error is on its way out)."""
        if reservation is None:
            return
        try:
            await self._add(
                user_id, (reservation.user_day, reservation.tenant_day), -reservation.tokens
            )
        except Exception:
            logger.warning("could not give back a turn's token reservation", exc_info=True)

    async def _add(self, user_id: uuid.UUID, day_keys: tuple[str, str], tokens: int) -> None:
        erased = mark_key(self.redis, user_id)
        for attempt in range(CHARGE_ATTEMPTS):
            try:
                await self._charge(keys=[erased, *day_keys], args=[tokens, 2 * DAY_SECONDS])
                return
            except (RedisError, OSError):
                if attempt == CHARGE_ATTEMPTS - 1 or not await self.redis.reachable():
                    break
                await asyncio.sleep(0.1 * 2**attempt)
        logger.warning("could not count a turn's tokens against the quota")


def _refuse_quota(scope: str, now: float) -> None:
    metrics.LIMIT_REJECTIONS.labels(scope=scope, kind="tokens").inc()  # used, or reserved
    raise TooManyRequests(
        f"The daily token quota of this {scope} is used up.",
        code="token_quota_exceeded",
        headers={"Retry-After": str(int(DAY_SECONDS - now % DAY_SECONDS) + 1)},
    )


def _check_rate(scope: str, count: int, limit: int, now: float) -> None:
    if limit and count > limit:
        metrics.LIMIT_REJECTIONS.labels(scope=scope, kind="requests").inc()
        raise TooManyRequests(
            f"Too many chat requests for this {scope}; retry in a minute.",
            code="rate_limited",
            headers={"Retry-After": str(int(60 - now % 60) + 1)},
        )

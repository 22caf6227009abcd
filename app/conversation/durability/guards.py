"""What stands around a chat turn: the live runs and their buffers, idempotency keys, limits,
and the accounting done when a run ends (quota, metrics)."""

from __future__ import annotations

from dataclasses import dataclass

from app.config import Settings
from app.conversation.durability.idempotency import IdempotencyStore
from app.conversation.durability.leases import TurnLeases
from app.conversation.streaming.buffer import StreamBuffer
from app.conversation.streaming.follow_limits import FollowLimits
from app.conversation.streaming.hub import StreamHub
from app.conversation.streaming.run import RunOutcome
from app.core.redis import RedisHandle
from app.limits.limiter import UsageLimiter, chargeable_tokens
from app.observability import metrics


@dataclass
class ChatGuards:
    """The per-process services around chat turns: live runs, idempotency, limits."""

    streams: StreamHub
    idempotency: IdempotencyStore
    limiter: UsageLimiter
    follows: FollowLimits
    """How many streams a user may follow (resume) at once and per minute."""
    leases: TurnLeases | None = None
    """Set in lifespan: who runs which turn, and the finisher of orphaned turns (needs the
    database, which the guards do not hold)."""

    @classmethod
    def build(cls, redis: RedisHandle, settings: Settings) -> ChatGuards:
        """Build the guards over one Redis handle."""
        buffer = StreamBuffer(redis, settings.sse_buffer_ttl_seconds)
        return cls(
            streams=StreamHub(redis, buffer, settings.sse_backlog_events),
            idempotency=IdempotencyStore(
                redis,
                settings.idempotency_ttl_seconds,
                # Outlives the longest turn: the model call, the end-of-turn write riding out a
                # database outage, and the lease after which another process finishes an
                # orphan and records its answer under the key. A claim that lapses earlier
                # lets a retry start a second turn for the same key.
                running_ttl_seconds=int(
                    settings.llm_timeout_seconds
                    + settings.db_write_retry_seconds
                    + settings.turn_lease_seconds
                    + settings.turn_sweep_seconds
                    + 60
                ),
            ),
            limiter=UsageLimiter(redis, settings),
            follows=FollowLimits(redis, settings),
        )

    async def account(self, outcome: RunOutcome) -> None:
        """Settle the turn's tokens against the day's quotas (its reservation replaced by what
        it used, whether it completed, failed, was stopped or cancelled); record its metrics."""
        terminal = outcome.terminal
        if terminal is None:
            metrics.STREAMS_ENDED.labels(outcome="cancelled").inc()
            tokens = outcome.spent()["total_tokens"]  # the prompt and what was streamed
        elif terminal.name == "error":
            metrics.STREAMS_ENDED.labels(outcome="error").inc()
            tokens = outcome.spent()["total_tokens"]
        else:
            done = terminal.data
            usage = done.get("usage") or {}
            stopped = bool(done.get("stopped"))
            metrics.STREAMS_ENDED.labels(outcome="stopped" if stopped else "complete").inc()
            tokens = chargeable_tokens(usage, self.limiter.cached_ratio)
            source = (done.get("context_metadata") or {}).get("history_source")
            if source in ("cache", "database"):
                result = "hit" if source == "cache" else "miss"
                metrics.HISTORY_CACHE.labels(result=result).inc()
            metrics.record_turn(
                done.get("node_ms") or {}, usage, done["status"], float(done.get("turn_ms") or 0)
            )
        turn = outcome.turn
        await self.limiter.settle(turn.tenant_id, turn.user_id, turn.reservation, tokens)

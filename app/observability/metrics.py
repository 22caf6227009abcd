"""Prometheus metrics of the chat turn, served at `/metrics`.

Module-level collectors in the default registry: one set per process, which is what a
Prometheus scrape of that process expects. The cache hit ratio is hits / (hits + misses)
of `threadline_history_cache_total`; the prompt cache's share is cached_prompt / prompt of
`threadline_tokens_total`.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import Counter, Gauge, Histogram

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

NODE_SECONDS = Histogram(
    "threadline_node_seconds", "Time spent in each node of a chat turn.", ["node"], buckets=_BUCKETS
)
TURN_SECONDS = Histogram(
    "threadline_turn_seconds",
    "Wall time of chat turns, by final status.",
    ["status"],
    buckets=_BUCKETS,
)
TOKENS = Counter(
    "threadline_tokens",
    "Model tokens used by chat turns: prompt, completion, and cached_prompt (the prompt tokens "
    "the provider read from its prompt cache, also counted in prompt).",
    ["kind"],
)
STREAMS_STARTED = Counter("threadline_streams_started", "SSE streams started.", ["kind"])
STREAMS_ACTIVE = Gauge("threadline_streams_active", "SSE streams being sent right now.")
STREAMS_BEHIND = Counter(
    "threadline_streams_behind",
    "Stream readers that fell a backlog behind and went on reading the Redis buffer in pages: "
    "reader local (a /chat/stream client) or follower (a resumed stream).",
    ["reader"],
)
STREAMS_ENDED = Counter("threadline_streams_ended", "Turns ended, by how.", ["outcome"])
HISTORY_CACHE = Counter(
    "threadline_history_cache", "History cache look-ups, by result.", ["result"]
)
LIMIT_REJECTIONS = Counter(
    "threadline_limit_rejections",
    "Chat requests and searches refused by a limit.",
    ["scope", "kind"],
)
SUMMARY_JOBS = Counter(
    "threadline_summary_jobs",
    "Background summary jobs, by outcome (folded, failed, busy, not_due, superseded).",
    ["outcome"],
)
IDEMPOTENT_REPLAYS = Counter(
    "threadline_idempotent_replays", "Retries answered without a new model call.", ["endpoint"]
)
FEEDBACK = Counter(
    "threadline_feedback",
    "Thumbs given on answers, by value (up, down); a changed mind counts again.",
    ["value"],
)
IDEMPOTENCY_RECALLED = Counter(
    "threadline_idempotency_recalled",
    "Idempotency-Keys Redis had forgotten (evicted, lost) that a turn's row still held.",
)


def record_turn(
    node_ms: dict[str, float], usage: Mapping[str, int], status: str, turn_ms: float
) -> None:
    """Record a finished turn's node times, token usage and wall time."""
    for node, ms in node_ms.items():
        NODE_SECONDS.labels(node=node).observe(ms / 1000)
    for kind in ("prompt_tokens", "completion_tokens", "cached_prompt_tokens"):
        TOKENS.labels(kind=kind.removesuffix("_tokens")).inc(int(usage.get(kind, 0) or 0))
    TURN_SECONDS.labels(status=status).observe(turn_ms / 1000)

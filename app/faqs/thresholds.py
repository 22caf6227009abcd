"""The FAQ fast path's similarity threshold, calibrated per embedder.

Each value was set on the paraphrase pairs of `tests/data/faq_pairs/` (matches and near
misses; README there): the lowest threshold with no near miss above it, so a wrong canned
answer is rarer than a missed one (a miss only costs a normal turn).
"""

from __future__ import annotations

from app.config import Settings

CALIBRATED = {
    "hashing": 0.90,
    "onnx": 0.72,
    "minilm": 0.72,
}
"""Threshold per `THREADLINE_EMBEDDER`; `minilm` is the same model as `onnx` (fp32)."""
UNCALIBRATED = 0.90


def faq_threshold(settings: Settings) -> float:
    """`THREADLINE_FAQ_SIMILARITY_THRESHOLD` if set, else the value calibrated for the
    configured embedder."""
    if settings.faq_similarity_threshold is not None:
        return settings.faq_similarity_threshold
    return CALIBRATED.get(settings.embedder, UNCALIBRATED)

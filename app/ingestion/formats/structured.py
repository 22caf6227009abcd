"""JSON: each value with its path (`plans[0].price: 9`); the top-level keys are sections."""

from __future__ import annotations

import json
from typing import Any

from app.core.location import Location
from app.ingestion.formats.base import Block, Budget, Extracted, ExtractionError

MAX_DEPTH = 64


def read(text: str, budget: Budget) -> Extracted:
    """The values of a JSON document, grouped by top-level key."""
    budget.take(text)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ExtractionError(f"The JSON could not be read: {exc}") from exc
    blocks: list[Block] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            lines = list(_lines(str(key), inner, 1))
            if lines:
                blocks.append(Block("text", "\n".join(lines), Location(section=str(key))))
    else:
        blocks += [Block("text", line) for line in _lines("", value, 0)]
    return Extracted(blocks)


def _lines(path: str, value: Any, depth: int) -> list[str]:
    if depth > MAX_DEPTH:
        raise ExtractionError(f"The JSON nests deeper than {MAX_DEPTH} levels; it is refused.")
    if isinstance(value, dict):
        return [
            line
            for key, inner in value.items()
            for line in _lines(f"{path}.{key}" if path else str(key), inner, depth + 1)
        ]
    if isinstance(value, list):
        return [
            line
            for i, inner in enumerate(value)
            for line in _lines(f"{path}[{i}]", inner, depth + 1)
        ]
    if value is None or value == "":
        return []
    return [f"{path}: {value}" if path else str(value)]

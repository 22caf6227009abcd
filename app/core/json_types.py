"""Numbers and date-times in requests, as their JSON Schema types mean them.

Pydantic's lax mode turns `true` into 1 and `"18"` into 18, which the OpenAPI document calls
invalid; strict mode refuses `18.0`, which JSON Schema calls an integer. These accept exactly
the JSON numbers the schema allows (an integer-valued number for an integer).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator


def json_number(value: Any) -> Any:
    """A `mode="before"` field validator: refuses what only lax mode would make a number.
    (A validator on the field, not the type, keeps `ge`/`le` in the JSON Schema.)"""
    if isinstance(value, bool | str | bytes):
        raise ValueError("must be a JSON number")
    return value


def _a_timestamp(value: Any) -> Any:
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return value
    raise ValueError("must be an ISO 8601 date-time")


DateTimeParam = Annotated[datetime, BeforeValidator(_a_timestamp)]
"""A date-time query parameter: ISO 8601 only (not a Unix time, which pydantic would take)."""

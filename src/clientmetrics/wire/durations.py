"""Kafka's millisecond durations and the ``timedelta`` kio types them as: both ways, here only.

kio reads and writes ThrottleTimeMs, PushIntervalMs and the other ``timedelta_i32``
/ ``timedelta_i64`` fields as ``datetime.timedelta``; the rest of the code counts
milliseconds in ints.
"""

from __future__ import annotations

from datetime import timedelta  # a duration, not a clock: wire/ reads no clock
from typing import Any

__all__ = ["from_millis", "timedelta", "to_millis"]


def to_millis(value: Any) -> int:
    """Milliseconds of a kio duration (a ``timedelta``); an int is taken as it is."""
    total = getattr(value, "total_seconds", None)
    return round(float(total()) * 1000) if total is not None else int(value)


def from_millis(millis: int) -> timedelta:
    """The ``timedelta`` kio writes for ``millis`` milliseconds."""
    return timedelta(milliseconds=millis)

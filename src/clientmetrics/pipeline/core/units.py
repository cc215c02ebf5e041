"""The unit a metric's values are in, when the client did not say.

librdkafka sends no OTLP units; KIP-714's tables of standard metrics give them in
words ("the average request latency in ms", "the rate ... per second"), following
the Java client's metrics: times and latencies are milliseconds, rates are per
second, ratios have none.
"""

from __future__ import annotations

import re

__all__ = ["display_unit"]

_RULES = (
    (re.compile(r"\.(latency|time)\.(avg|max|total)$"), "ms"),
    (re.compile(r"\.time\.ns\.(avg|max|total)$"), "ns"),
    (re.compile(r"\.bytes?\.rate$"), "bytes/s"),
    (re.compile(r"\.rate$"), "/s"),
    (re.compile(r"\.bytes?(\.(avg|max|total))?$"), "bytes"),
)


def display_unit(metric_name: str, otlp_unit: str = "") -> str:
    """The client's own unit when it sent one, else the one the name implies ('' if none)."""
    if otlp_unit:
        return otlp_unit
    for pattern, unit in _RULES:
        if pattern.search(metric_name):
            return unit
    return ""

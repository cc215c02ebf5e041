"""OpenTelemetry → Prometheus names (the OpenTelemetry specification's compatibility rules).

Pure functions: a metric name and unit become a Prometheus metric name, an
attribute key becomes a label name. ``_total`` is not added here: the exposition
library adds it to counters (monotonic sums) when it writes them.
"""

from __future__ import annotations

import functools
import re

_INVALID_METRIC = re.compile(r"[^a-zA-Z0-9_:]+")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]+")
_UNDERSCORES = re.compile(r"__+")

#: UCUM units as the specification spells them out.
UNITS = {
    "d": "days",
    "h": "hours",
    "min": "minutes",
    "s": "seconds",
    "ms": "milliseconds",
    "us": "microseconds",
    "ns": "nanoseconds",
    "By": "bytes",
    "KiBy": "kibibytes",
    "MiBy": "mebibytes",
    "GiBy": "gibibytes",
    "TiBy": "tibibytes",
    "KBy": "kilobytes",
    "MBy": "megabytes",
    "GBy": "gigabytes",
    "TBy": "terabytes",
    "m": "meters",
    "V": "volts",
    "A": "amperes",
    "J": "joules",
    "W": "watts",
    "g": "grams",
    "Cel": "celsius",
    "Hz": "hertz",
    "%": "percent",
}
_PER = {
    "s": "second",
    "m": "minute",
    "h": "hour",
    "d": "day",
    "w": "week",
    "mo": "month",
    "y": "year",
}


def unit_suffix(unit: str, *, gauge: bool) -> str:
    """The name suffix for an OTLP unit ('' for none; ``{...}`` annotations drop out)."""
    unit = re.sub(r"\{[^}]*\}", "", unit).strip()
    if not unit:
        return ""
    if unit == "1":
        return "ratio" if gauge else ""
    main, _, per = unit.partition("/")
    parts = [UNITS.get(main, main)] if main else []
    if per:
        parts.append("per_" + _PER.get(per, UNITS.get(per, per)))
    return _clean(_INVALID_LABEL.sub("_", "_".join(parts)))


@functools.lru_cache(maxsize=4096)
def metric_name(name: str, unit: str, gauge: bool) -> str:
    """``org.apache.kafka.producer.record.queue.time.avg`` + ``ms`` →
    ``org_apache_kafka_producer_record_queue_time_avg_milliseconds``."""
    out = _clean(_INVALID_METRIC.sub("_", name))
    suffix = unit_suffix(unit, gauge=gauge)
    if suffix and not out.endswith("_" + suffix):
        out = f"{out}_{suffix}"
    if out.endswith("_total"):  # the exposition adds it back to counters only
        out = out[: -len("_total")]
    return "_" + out if out[:1].isdigit() else out or "_"


@functools.lru_cache(maxsize=4096)
def label_name(key: str) -> str:
    """``node.id`` → ``node_id``; a leading digit gets ``key_`` (as the specification says)."""
    out = _clean(_INVALID_LABEL.sub("_", key))
    if out[:1].isdigit():
        out = "key_" + out
    return out or "_"


def _clean(text: str) -> str:
    return _UNDERSCORES.sub("_", text).strip("_") if text.strip("_") else text

"""KIP-714 metric naming: Kafka metric (group, name, tags) -> telemetry name and attributes.

The rule is Java's ``TelemetryMetricNamingConvention`` (reference §4.6):

* name = ``org.apache.kafka.`` + clean(group) with every ``.metrics`` removed
  + ``.`` + clean(name), where clean lower-cases and turns ``-`` into ``.``;
* tag keys lower-case with ``-`` turned into ``_``; values unchanged;
* the ``client_id`` tag is left out (the broker knows it from the request header).

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "ATTRIBUTE_ALIASES",
    "ATTRIBUTE_VALUES",
    "COORDINATOR",
    "TELEMETRY_PREFIX",
    "telemetry_attributes",
    "telemetry_name",
    "telemetry_tag_key",
]

TELEMETRY_PREFIX = "org.apache.kafka"
_EXCLUDED_TAG = "client_id"

#: Point attribute keys that name the same label, to the one key kept downstream.
#: The per-broker attribute is ``node.id`` from librdkafka but ``node_id`` from
#: the Java client (its ``node-id`` tag cleaned) and franz-go; decoded points
#: carry ``node.id`` either way, so a broker is one label in series and rules.
ATTRIBUTE_ALIASES = {"node_id": "node.id"}

#: Values of one label spelled differently, as (RE2 pattern, replacement) by the key kept
#: downstream. librdkafka and franz-go send the broker's integer id; the Java client sends
#: its connection id, ``node-<id>`` (``node--1`` for a bootstrap connection), a string.
#: Decoded, all three are the id's decimal text: ``node-1`` and ``1`` are one series.
#: The Java client's connection to its group coordinator is ``node-+<broker id>`` (Kafka
#: 4's ``GroupCoordinatorNode`` names it ``+`` and the id): decoded ``+1``, a series of
#: its own beside broker 1's other connection, about the same broker (``COORDINATOR``).
ATTRIBUTE_VALUES = {"node.id": (r"^node-([-+]?[0-9]+)$", r"\1")}
#: A decoded ``node.id`` of the Java client's group coordinator connection starts so.
COORDINATOR = "+"


def _clean(value: str, joiner: str) -> str:
    return value.lower().replace("-", joiner)


def _clean_group(group: str) -> str:
    # Java: replaceAll("\\.(metrics)", "") -- unanchored, so every ".metrics" goes,
    # which is why "group-metrics-metrics" becomes "group".
    return _clean(group, ".").replace(".metrics", "")


def telemetry_name(group: str, name: str) -> str:
    """The telemetry metric name of a Kafka metric ``name`` in ``group``.

    >>> telemetry_name("producer-metrics", "record-queue-time-avg")
    'org.apache.kafka.producer.record.queue.time.avg'
    """
    return f"{TELEMETRY_PREFIX}.{_clean_group(group)}.{_clean(name, '.')}"


def telemetry_tag_key(key: str) -> str:
    """A Kafka metric tag key as a telemetry attribute key (``-`` -> ``_``)."""
    return _clean(key, "_")


def telemetry_attributes(tags: Mapping[str, str]) -> dict[str, str]:
    """Point attributes for a metric's tags: keys cleaned, values kept, client_id left out."""
    out: dict[str, str] = {}
    for key, value in tags.items():
        cleaned = telemetry_tag_key(key)
        if cleaned != _EXCLUDED_TAG:
            out[cleaned] = value
    return out

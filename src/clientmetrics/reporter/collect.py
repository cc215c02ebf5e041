"""Client metrics -> telemetry points: KIP-714 names, standard metrics first, temporality.

The input is a neutral list of :class:`RawMetric` (read from kafka-python's
registry by ``reporter.kafka_python``); the output is :class:`MetricPoint`
values ready for ``reporter.payload``. Cumulative counters become monotonic
Sums, delta or cumulative as the subscription asks; everything else is a Gauge
(reference §4.7). No I/O; time is passed in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from clientmetrics.reporter.payload import MetricPoint
from clientmetrics.telemetry.client_state import ReceivedSubscription
from clientmetrics.telemetry.naming import telemetry_attributes, telemetry_name
from clientmetrics.telemetry.standard import STANDARD_METRICS

__all__ = [
    "ALIASES",
    "STANDARD_METRICS",
    "Collector",
    "RawMetric",
]

_P = "org.apache.kafka."

#: (group, name) -> telemetry name where a client's metric is the KIP's under another
#: name: kafka-python's producer records broker throttle time only as
#: ``throttle-time-*`` (Java: ``produce-throttle-time-*``).
ALIASES: Mapping[tuple[str, str], str] = {
    ("producer-metrics", "throttle-time-avg"): _P + "producer.produce.throttle.time.avg",
    ("producer-metrics", "throttle-time-max"): _P + "producer.produce.throttle.time.max",
}

# kafka-python puts the node in the group name: "producer-node-metrics.node-3".
_NODE_GROUP = re.compile(r"^(?P<group>[a-z]+-node-metrics)\.node-(?P<node>-?\d+|bootstrap-\d+)$")


@dataclass(frozen=True, slots=True)
class RawMetric:
    """A client metric as its registry holds it."""

    group: str
    name: str
    tags: tuple[tuple[str, str], ...]
    value: float
    #: A cumulative counter (Java CumulativeSum/CumulativeCount): sent as a Sum.
    cumulative: bool = False


@dataclass(slots=True)
class _Baseline:
    added_ns: int
    last_ns: int
    last_value: float


def _identify(raw: RawMetric) -> tuple[str, dict[str, str | int]] | None:
    """(telemetry name, point attributes), or ``None`` for metrics not to report."""
    group = raw.group
    attributes: dict[str, str | int] = dict(telemetry_attributes(dict(raw.tags)))
    node = _NODE_GROUP.match(group)
    if node is not None:
        if node["node"].startswith("bootstrap"):
            return None  # bootstrap connections are not brokers (librdkafka skips them too)
        group = node["group"]
        attributes["node_id"] = int(node["node"])
    name = ALIASES.get((group, raw.name)) or telemetry_name(group, raw.name)
    return name, attributes


class Collector:
    """Turns registry snapshots into points, remembering delta baselines."""

    def __init__(self) -> None:
        self._baselines: dict[tuple[str, tuple[tuple[str, str | int], ...]], _Baseline] = {}
        self._delta: bool | None = None

    def reset(self) -> None:
        """Forget every baseline (the subscription's temporality changed)."""
        self._baselines.clear()

    def collect(
        self,
        raw_metrics: Iterable[RawMetric],
        subscription: ReceivedSubscription,
        now_ns: int,
    ) -> list[MetricPoint]:
        """The subscribed points, KIP standard metrics first, then by name."""
        delta = subscription.delta_temporality
        if self._delta is not None and delta != self._delta:
            self.reset()
        self._delta = delta
        points: list[MetricPoint] = []
        for raw in raw_metrics:
            if not math.isfinite(raw.value):
                continue  # an empty Max is -inf: nothing measured yet
            identified = _identify(raw)
            if identified is None or not subscription.selects(identified[0]):
                continue
            name, attributes = identified
            if raw.cumulative:
                points.append(self._sum(name, attributes, raw.value, now_ns, delta))
            else:
                value = int(raw.value) if float(raw.value).is_integer() else raw.value
                points.append(MetricPoint(name, value, now_ns, attributes=attributes))
        points.sort(key=lambda p: (p.name not in STANDARD_METRICS, p.name))
        return points

    def _sum(
        self,
        name: str,
        attributes: dict[str, str | int],
        value: float,
        now_ns: int,
        delta: bool,
    ) -> MetricPoint:
        key = (name, tuple(sorted(attributes.items(), key=lambda kv: kv[0])))
        base = self._baselines.get(key)
        if base is None:
            base = self._baselines[key] = _Baseline(now_ns, now_ns, 0.0)
            start = now_ns
        else:
            start = base.last_ns if delta else base.added_ns
        sent = value - base.last_value if delta else value
        base.last_ns, base.last_value = now_ns, value
        number = int(sent) if float(sent).is_integer() else sent
        return MetricPoint(
            name,
            number,
            now_ns,
            is_sum=True,
            start_time_unix_nano=start if delta else base.added_ns,
            delta=delta,
            attributes=attributes,
        )

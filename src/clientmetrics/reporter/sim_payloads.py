"""librdkafka-shaped metric sets for simulated producers and consumers.

The names, types and attributes follow the golden librdkafka 2.16 pushes
(tests/data/librdkafka-2.16/): a producer sends 10 metrics, a consumer 13,
per-broker latency copies carry an integer ``node.id`` (-1 for the group
coordinator), no units. Values are drawn around realistic figures; an
unhealthy client reports request latencies far above normal.

A client may carry a fault (``SimFault``, one per kind the findings catalogue
knows): from its onset its metrics show that fault, so findings are measured
against a known ground truth (bench/findings.py).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from clientmetrics.reporter.payload import MetricPoint

__all__ = ["FAULTS", "NONSTANDARD_FAULTS", "SHIFTED_FAULTS", "SimFault", "SimMetrics", "fault_for"]

_P = "org.apache.kafka."

#: Fault kinds, the client kind each applies to, and the finding that should name it.
FAULTS = {
    "slow-processing": ("consumer", "slow-processing"),
    "throttled": ("producer", "throttled-producer"),
    "send-buffer": ("producer", "send-buffer-pressure"),
    "reconnect-storm": (None, "reconnect-storm"),
    "slow-commits": ("consumer", "slow-commits"),
    "slow-broker": (None, "slow-broker-requests"),
    "rebalance-churn": ("consumer", "rebalance-churn"),
    # On the Java client's non-standard metrics (``SimMetrics.nonstandard``).
    "one-record-per-request": ("producer", "one-record-per-request"),
    "producer-retries": ("producer", "producer-retries"),
    "producer-errors": ("producer", "producer-errors"),
    "failed-authentication": (None, "failed-authentication"),
    # Out of profile: no threshold crossed. Request latencies 8 times the client's usual
    # (about 20 ms), from the onset on; or from its first push (a client unlike its
    # cohort from the start: the bench starts it at its onset).
    "latency-shift": (None, "out-of-profile"),
    "cohort-outlier": (None, "out-of-cohort"),
}
#: The faults that multiply a client's request latencies (``LATENCY_FACTOR``).
SHIFTED_FAULTS = frozenset({"latency-shift", "cohort-outlier"})
LATENCY_FACTOR = 8.0
#: The faults shown in the Java client's non-standard metrics: a client carrying one
#: sends them (``SimMetrics.nonstandard``), as a Java client would.
NONSTANDARD_FAULTS = frozenset(
    {"one-record-per-request", "producer-retries", "producer-errors", "failed-authentication"}
)
#: The broker a ``slow-broker`` fault slows (every faulty client's node 0).
SLOW_NODE = 0


@dataclass(frozen=True, slots=True)
class SimFault:
    """A fault injected at ``onset_seconds`` into a ``fraction`` of the clients it applies to."""

    kind: str
    onset_seconds: float
    fraction: float

    @classmethod
    def parse(cls, text: str) -> SimFault:
        """``KIND@ONSET[s]:FRACTION``, e.g. ``slow-processing@120s:0.05``."""
        try:
            kind, rest = text.split("@", 1)
            onset, fraction = rest.split(":", 1)
            fault = cls(kind, float(onset.removesuffix("s")), float(fraction))
        except ValueError:
            raise ValueError(f"bad fault {text!r}; expected KIND@SECONDS:FRACTION") from None
        if kind not in FAULTS or fault.onset_seconds < 0 or not 0 < fault.fraction <= 1:
            raise ValueError(f"bad fault {text!r}; kinds: {', '.join(FAULTS)}; 0 < FRACTION <= 1")
        return fault

    def applies_to(self, client_kind: str) -> bool:
        wanted = FAULTS[self.kind][0]
        return wanted is None or wanted == client_kind


def fault_for(index: int, kind: str, faults: Sequence[SimFault]) -> SimFault | None:
    """The fault client ``index`` carries, if any: the same in every process of a run.

    Each fault takes its ``fraction`` of the clients it applies to, by a stable
    hash of the index; faults listed first are served first when fractions
    add up past 1.
    """
    draw = zlib.crc32(f"fault:{index}".encode()) / 2**32
    low = 0.0
    for fault in faults:
        if fault.applies_to(kind):
            if low <= draw < low + fault.fraction:
                return fault
            low += fault.fraction
    return None


@dataclass
class SimMetrics:
    """One simulated client's metrics, with its counters and their start time."""

    kind: str  # "producer" or "consumer"
    unhealthy: bool
    unhealthy_latency_ms: float
    started_ns: int
    connections: int = 1
    rebalance_ms: int = 0
    #: The fault this client shows from ``fault_onset_ns`` on (``FAULTS``), if any.
    fault: str | None = None
    fault_onset_ns: int = 0
    #: Also send the Java client's non-standard metrics the findings read (records per
    #: request, retry and error rates, failed authentications); always with such a fault.
    nonstandard: bool = False
    _last_ns: int = 0
    _last_sent: tuple[int, int] = (0, 0)

    def resource(self, index: int) -> dict[str, str | int]:
        """The resource attributes librdkafka sets (the gateway adds the rest)."""
        if self.kind == "consumer":
            return {"client_rack": "rack-a", "group_id": f"sim-group-{index % 10}"}
        return {}

    def points(self, rng: random.Random, now_ns: int, delta: bool) -> list[MetricPoint]:
        """A fresh set of points at ``now_ns``."""
        latency = self._latency(rng)
        nodes = (0,) if self.kind == "producer" else (0, -1)
        fault = self.fault if self.fault is not None and now_ns >= self.fault_onset_ns else None
        if fault in SHIFTED_FAULTS:
            latency = round(latency * LATENCY_FACTOR, 3)
        # The healthy draws keep their order (a seeded run gives what it gave before faults).
        if rng.random() < 0.01:
            self.connections += 1
        rate = rng.uniform(2.0, 8.0) if fault == "reconnect-storm" else rng.uniform(0, 0.05)
        if fault == "reconnect-storm":
            self.connections += int(rate * (now_ns - (self._last_ns or now_ns)) / 1e9)
        points = [
            self._gauge("connection.creation.rate", round(rate, 4), now_ns),
            self._counter("connection.creation.total", self.connections, now_ns, delta, 0),
        ]
        for node in nodes:
            attrs: dict[str, str | int] = {"node.id": node}
            node_latency = latency
            if fault == "slow-broker" and node == SLOW_NODE:
                node_latency = round(rng.uniform(2000.0, 5000.0), 3)
            points.append(self._gauge("node.request.latency.avg", node_latency, now_ns, attrs))
            points.append(
                self._gauge("node.request.latency.max", int(node_latency * 1.8) + 1, now_ns, attrs)
            )
        if self.kind == "producer":
            queue = round(rng.uniform(0.1, 4.0), 3)
            if fault == "send-buffer":
                queue = round(rng.uniform(1500.0, 4000.0), 3)
            throttle = round(rng.uniform(200.0, 900.0), 3) if fault == "throttled" else 0.0
            points += [
                self._gauge("produce.throttle.time.avg", throttle, now_ns),
                self._gauge("produce.throttle.time.max", int(throttle * 2), now_ns),
                self._gauge("record.queue.time.avg", queue, now_ns),
                self._gauge("record.queue.time.max", int(queue * 3) + 1, now_ns),
                self._gauge("request.latency.avg", latency, now_ns),
                self._gauge("request.latency.max", int(latency * 1.8) + 1, now_ns),
            ]
        else:
            fetch = self._latency(rng) + 480.0  # fetch.wait.max.ms dominates
            self.rebalance_ms += 0 if rng.random() < 0.99 else rng.randint(50, 3000)
            rebalance_avg = 120.0
            if fault == "rebalance-churn":
                # 20-50 % of the time since the last push spent rebalancing.
                elapsed_ms = (now_ns - (self._last_ns or now_ns)) / 1e6
                self.rebalance_ms += int(rng.uniform(0.2, 0.5) * elapsed_ms)
                rebalance_avg = round(rng.uniform(2000.0, 8000.0), 3)
            idle = rng.uniform(0.01, 0.1) if fault == "slow-processing" else rng.uniform(0.6, 1.0)
            commit = self._latency(rng)
            if fault == "slow-commits":
                commit = round(rng.uniform(1500.0, 4000.0), 3)
            points += [
                self._gauge("poll.idle.ratio.avg", round(idle, 4), now_ns),
                self._gauge("coordinator.commit.latency.avg", commit, now_ns),
                self._gauge("coordinator.commit.latency.max", int(latency * 2) + 1, now_ns),
                self._gauge("coordinator.assigned.partitions", rng.randint(1, 12), now_ns),
                self._gauge("coordinator.rebalance.latency.avg", rebalance_avg, now_ns),
                self._gauge("coordinator.rebalance.latency.max", 240, now_ns),
                self._counter(
                    "coordinator.rebalance.latency.total", self.rebalance_ms, now_ns, delta, 1
                ),
                self._gauge("fetch.manager.fetch.latency.avg", round(fetch, 3), now_ns),
                self._gauge("fetch.manager.fetch.latency.max", int(fetch * 1.2), now_ns),
            ]
        if self.nonstandard or self.fault in NONSTANDARD_FAULTS:
            points += self._nonstandard(rng, now_ns, fault)
        self._last_ns = now_ns
        return points

    def _nonstandard(self, rng: random.Random, now_ns: int, fault: str | None) -> list[MetricPoint]:
        """The Java client's own metrics the findings read, healthy unless ``fault`` says."""
        failed = rng.uniform(0.2, 1.0) if fault == "failed-authentication" else 0.0
        points = [self._gauge("failed.authentication.rate", round(failed, 4), now_ns)]
        if self.kind == "producer":
            per_request = rng.uniform(1.0, 1.1) if fault == "one-record-per-request" else None
            retries = rng.uniform(2.0, 20.0) if fault == "producer-retries" else 0.0
            errors = rng.uniform(0.5, 5.0) if fault == "producer-errors" else 0.0
            points += [
                self._gauge(
                    "records.per.request.avg",
                    round(per_request or rng.uniform(5.0, 50.0), 3),
                    now_ns,
                ),
                self._gauge("record.retry.rate", round(retries, 4), now_ns),
                self._gauge("record.error.rate", round(errors, 4), now_ns),
            ]
        return points

    def _latency(self, rng: random.Random) -> float:
        if self.unhealthy:
            return round(self.unhealthy_latency_ms * rng.uniform(0.95, 1.3), 3)
        return round(max(0.2, rng.gauss(2.5, 0.8)), 3)

    def _gauge(
        self, name: str, value: float, now_ns: int, attrs: dict[str, str | int] | None = None
    ) -> MetricPoint:
        return MetricPoint(f"{_P}{self.kind}.{name}", value, now_ns, attributes=attrs or {})

    def _counter(self, name: str, total: int, now_ns: int, delta: bool, slot: int) -> MetricPoint:
        previous = self._last_sent[slot]
        sent = list(self._last_sent)
        sent[slot] = total
        self._last_sent = (sent[0], sent[1])
        start = (self._last_ns or self.started_ns) if delta else self.started_ns
        return MetricPoint(
            f"{_P}{self.kind}.{name}",
            total - previous if delta else total,
            now_ns,
            is_sum=True,
            start_time_unix_nano=start,
            delta=delta,
        )

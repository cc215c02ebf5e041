"""Landed pushes made up on demand, following docs/landing.md, for the tests and the bench.

The payloads have librdkafka's shape: a producer's gauges and cumulative sums,
per-broker copies of latency metrics with an int ``node.id`` attribute, the
resource attributes librdkafka sends. Nothing here needs Spark.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m
from opentelemetry.proto.resource.v1 import resource_pb2

from clientmetrics.exporters.landing_files import write_landed
from clientmetrics.pipeline.core.schemas import LANDING_ARROW

PREFIX = "org.apache.kafka.producer."
GAUGES = (
    "record.queue.time.avg",
    "record.queue.time.max",
    "produce.throttle.time.avg",
    "produce.throttle.time.max",
)
NODE_GAUGES = ("node.request.latency.avg", "node.request.latency.max")
SUMS = ("connection.creation.total", "request.total")


@dataclass(frozen=True, slots=True)
class Push:
    """One push to land: who sent it, when, and its decompressed payload."""

    received_at_us: int
    client_instance_id: str
    payload: bytes
    client_id: str = "app-1"
    terminating: bool = False
    push_interval_ms: int = 5000
    client_source_address: str = "127.0.0.1"
    client_source_port: int = 40000
    client_software_name: str = "librdkafka"
    client_software_version: str = "2.16.0"


def kv(key: str, value: str | int) -> common_pb2.KeyValue:
    """An OTLP attribute: an int value as int_value, anything else as string_value."""
    if isinstance(value, int):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(int_value=value))
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))


def producer_payload(
    time_ns: int, step: int, brokers: Sequence[int] = (1, 2, 3), latency: float | None = None
) -> bytes:
    """A librdkafka-like producer push at ``time_ns``; ``step`` drives the counters.

    ``latency`` sets every node latency gauge (for alert tests); by default it varies.
    """
    start = time_ns - 5_000_000_000
    metrics = [
        m.Metric(
            name=PREFIX + name,
            gauge=m.Gauge(
                data_points=[
                    m.NumberDataPoint(
                        start_time_unix_nano=start, time_unix_nano=time_ns, as_double=step * 0.5
                    )
                ]
            ),
        )
        for name in GAUGES
    ]
    for name in NODE_GAUGES:
        for node in (*brokers, -1):
            value = latency if latency is not None else float(10 + node + step % 7)
            point = m.NumberDataPoint(
                start_time_unix_nano=start,
                time_unix_nano=time_ns,
                as_double=value,
                attributes=[kv("node.id", node)],
            )
            metrics.append(m.Metric(name=PREFIX + name, gauge=m.Gauge(data_points=[point])))
    for name in SUMS:
        total = m.Sum(
            aggregation_temporality=m.AGGREGATION_TEMPORALITY_CUMULATIVE,
            is_monotonic=True,
            data_points=[
                m.NumberDataPoint(
                    start_time_unix_nano=time_ns - 3_600_000_000_000,
                    time_unix_nano=time_ns,
                    as_int=10 * step,
                )
            ],
        )
        metrics.append(m.Metric(name=PREFIX + name, sum=total))
    resource = resource_pb2.Resource(
        attributes=[kv("client_rack", "rack-a"), kv("transactional_id", "tx-1")]
    )
    scope = common_pb2.InstrumentationScope(name="app-1#producer-1", version="2.16.0")
    data = m.MetricsData(
        resource_metrics=[
            m.ResourceMetrics(
                resource=resource, scope_metrics=[m.ScopeMetrics(scope=scope, metrics=metrics)]
            )
        ]
    )
    serialized: bytes = data.SerializeToString()
    return serialized


def points_per_producer_payload(brokers: int = 3) -> int:
    """How many data points ``producer_payload`` holds."""
    return len(GAUGES) + len(NODE_GAUGES) * (brokers + 1) + len(SUMS)


def landing_table(pushes: Sequence[Push]) -> pa.Table:
    """Landing rows for the pushes, with the contract's exact types."""
    columns = {
        "received_at": [p.received_at_us for p in pushes],
        "client_instance_id": [p.client_instance_id for p in pushes],
        "subscription_id": [1] * len(pushes),
        "terminating": [p.terminating for p in pushes],
        "client_id": [p.client_id for p in pushes],
        "client_software_name": [p.client_software_name for p in pushes],
        "client_software_version": [p.client_software_version for p in pushes],
        "client_source_address": [p.client_source_address for p in pushes],
        "client_source_port": [p.client_source_port for p in pushes],
        "principal": ["User:ANONYMOUS"] * len(pushes),
        "node_id": [0] * len(pushes),
        "listener": ["PLAINTEXT"] * len(pushes),
        "security_protocol": ["PLAINTEXT"] * len(pushes),
        "compression_type": [4] * len(pushes),
        "push_interval_ms": [p.push_interval_ms for p in pushes],
        "payload": [p.payload for p in pushes],
    }
    arrays = [pa.array(columns[f.name], f.type) for f in LANDING_ARROW]
    return pa.Table.from_arrays(arrays, schema=LANDING_ARROW)


def land(data_dir: Path, pushes: Sequence[Push], segment: str | None = None) -> Path:
    """Write pushes as one landed file, atomically, in the partition of the first push."""
    table = landing_table(pushes)
    first = pushes[0].received_at_us
    stamp = pa.scalar(first, LANDING_ARROW.field("received_at").type).as_py()
    partition = data_dir / "landing" / "pushes" / f"date={stamp:%Y-%m-%d}" / f"hour={stamp:%H}"
    partition.mkdir(parents=True, exist_ok=True)
    name = f"part-{first // 1000}-{segment or uuid.uuid4().hex[:8]}.parquet"
    staging = data_dir / "landing" / ".staging"
    staging.mkdir(parents=True, exist_ok=True)
    write_landed(table, staging / name)
    os.replace(staging / name, partition / name)
    return partition / name

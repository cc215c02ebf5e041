"""Hostile pushes and topic records: each kind the validation table names, and what it costs.

Each maker returns input that must leave the pipeline's tables as they would be
without it, and the dead letters it must leave, counted by reason (worked out by
hand from docs/record-format.md's validation table). The instance ids are new
ones: a hostile push that made a client would show in the clients table.
"""

from __future__ import annotations

import pyarrow as pa
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m

from tests.pipeline.topic_records import topic_records
from tests.synthetic import Push, landing_table

MAX_U64 = 2**64 - 1
S_NS = 1_000_000_000


def hostile_id(n: int) -> str:
    return f"00000000-0000-0000-0000-0000000bad{n:02d}"


def payload(*metrics: m.Metric) -> bytes:
    data = m.MetricsData(
        resource_metrics=[m.ResourceMetrics(scope_metrics=[m.ScopeMetrics(metrics=metrics)])]
    )
    serialized: bytes = data.SerializeToString()
    return serialized


def gauge(name: str, time_ns: int, value: float = 1.0, count: int = 1) -> m.Metric:
    points = [m.NumberDataPoint(time_unix_nano=time_ns, as_double=value) for _ in range(count)]
    return m.Metric(name=name, gauge=m.Gauge(data_points=points))


def histogram_with_count(name: str, time_ns: int, count: int) -> m.Metric:
    point = m.HistogramDataPoint(time_unix_nano=time_ns, count=count, bucket_counts=[1, 2])
    return m.Metric(
        name=name, histogram=m.Histogram(data_points=[point], aggregation_temporality=2)
    )


def hostile_pushes(at_us: int, too_many: int = 100_001) -> tuple[list[Push], dict[str, int]]:
    """Pushes received at ``at_us`` none of which may reach a table, and their dead letters."""
    at_ns = at_us * 1000
    pushes = [
        # The push: one point at 2^64 - 1 ns (the year 2554).
        Push(at_us, hostile_id(1), payload(gauge("g.max", MAX_U64))),
        Push(
            at_us,
            hostile_id(2),
            payload(gauge("g.zero", 0), gauge("g.late", at_ns + 2 * 3600 * S_NS)),
        ),
        Push(at_us, hostile_id(3), b"\xff\xff\xff"),
        Push(at_us, hostile_id(4), payload(histogram_with_count("h.count", at_ns, MAX_U64))),
        Push(at_us, hostile_id(5), payload(gauge("g.many", at_ns, count=too_many))),
        Push(at_us, "not-a-uuid", payload(gauge("g.id", at_ns))),
        Push(at_us, hostile_id(6).upper(), payload(gauge("g.upper", at_ns))),
    ]
    expected = {
        "point_time_out_of_range": 3,  # 2^64 - 1, 0, and two hours ahead: points
        "payload_not_otlp": 1,
        "point_count_out_of_range": 1,
        "too_many_points": 1,
        "invalid_instance_id": 2,  # not a UUID; not the canonical (lower-case) text
    }
    return pushes, expected


Record = tuple[bytes | None, bytes, list[tuple[str, bytes]]]


def _with(record: Record, key: bytes | None = None, **headers: bytes) -> Record:
    """The record with headers replaced (``None``-valued dropped) and maybe another key."""
    old_key, value, old = record
    kept = [(k, v) for k, v in old if k not in headers]
    return (key if key is not None else old_key, value, kept + list(headers.items()))


def hostile_records(at_us: int) -> tuple[list[Record], dict[str, int]]:
    """Topic records, none of which may reach a table, and their dead letters by reason."""
    pushes, _ = hostile_pushes(at_us, too_many=3)
    good = landing_table(
        [Push(at_us, hostile_id(20 + n), payload(gauge("g", at_us * 1000))) for n in range(9)]
    )
    base = topic_records(good)

    def no_id(record: Record, key: bytes) -> Record:
        _, value, headers = record
        return (key, value, [(k, v) for k, v in headers if k != "client_instance_id"])

    records = [
        _with(base[0], received_at=b"abc"),
        _with(base[1], client_source_port=b"99999999999"),
        _with(base[2], push_interval_ms=b"1e3"),
        _with(base[3], client_id=b"\xff\xfeapp"),
        no_id(base[4], b"not-a-uuid"),
        no_id(base[5], b"\xff\xff"),
        _with(base[6], terminating=b"maybe"),
        _with(base[7], received_at=b"1"),  # 1970: a number, not a plausible receipt
        _with(base[8], received_at=b"99999999999999999"),  # past the year 9999
        *topic_records(landing_table(pushes[:2])),  # valid records of the 2^64 - 1 pushes
    ]
    expected = {
        "invalid_header": 5,
        "header_not_utf8": 2,
        "invalid_instance_id": 1,
        "invalid_received_at": 1,
        "point_time_out_of_range": 3,
    }
    return records, expected


def records_table(records: list[Record], topic: str = "t", partition: int = 0) -> pa.Table:
    """Records as Spark's Kafka source hands them over (``RECORDS_ARROW``)."""
    from clientmetrics.pipeline.core.records import RECORDS_ARROW

    return pa.table(
        {
            "key": [key for key, _, _ in records],
            "value": [value for _, value, _ in records],
            "topic": [topic] * len(records),
            "partition": [partition] * len(records),
            "offset": list(range(len(records))),
            "timestamp": [1_795_300_009_000_000] * len(records),
            "headers": [[{"key": k, "value": v} for k, v in h] for _, _, h in records],
        },
        schema=RECORDS_ARROW,
    )

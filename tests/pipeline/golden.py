"""The golden input (a few landed files) and the golden tables the pipeline made of it.

The tables under ``tests/data/pipeline-golden`` were recorded from the job's
run over ``golden_batches()`` (one micro-batch per file) before its rules were
moved into one core; the tests hold every run to them. Since then one
change on purpose: ``silent`` is judged against the newest landed push (the
slow producer's last, at minute 7), not the wall clock, so that producer is no
longer silent. Re-record only on purpose (``python -m tests.pipeline.golden
TABLES_DIR`` writes the files from a finished run's tables) and review the
diff row by row.

The input has what each rule must get right: librdkafka producers (per-broker
latency copies with an int ``node.id``, cumulative sums) that fire and resolve
an alert across batches; a client with delta and cumulative sums (resets, a
point with no start time), a delta histogram and gauges, its attributes sent
in either order; librdkafka's own consumer push; empty pushes; a terminating
push.
"""

from __future__ import annotations

import json
import math
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m

from tests.golden import LIBRDKAFKA as FIXTURES
from tests.synthetic import Push, kv, producer_payload

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "pipeline-golden"
TABLES = ("points", "client_windows", "clients", "alerts")
LATENCY = "org.apache.kafka.producer.node.request.latency.avg"
S = 1_000_000_000
T0_US = 1_795_300_000_000_000  # 2026-11-21T22:26:40Z
T0_NS = T0_US * 1000
SLOW = "00000000-0000-0000-0000-00000000000a"
FAST = "00000000-0000-0000-0000-00000000000b"
MIXED = "00000000-0000-0000-0000-00000000000c"
CONSUMER = "00000000-0000-0000-0000-00000000000d"
EMPTY = "00000000-0000-0000-0000-00000000000e"

#: The alert rules of the golden run (``parse_rules`` input).
RULES = {
    "rule": [
        {
            "name": "slow",
            "metric": LATENCY,
            "condition": "exceeded 5000 ms for more than 120 seconds",
        },
        {"name": "c-high", "metric": "c", "op": ">=", "threshold": 4, "for": "15s"},
    ]
}


def mixed_payload(step: int, swap: bool) -> bytes:
    """Delta and cumulative sums (with resets), a delta histogram, a gauge; attributes reordered."""
    now = T0_NS + step * 10 * S
    attrs = [kv("node.id", 1), kv("topic", "t")]
    attrs = attrs[::-1] if swap else attrs
    delta = m.Sum(
        aggregation_temporality=m.AGGREGATION_TEMPORALITY_DELTA,
        is_monotonic=True,
        data_points=[
            m.NumberDataPoint(
                start_time_unix_nano=now - 10 * S, time_unix_nano=now, as_int=step, attributes=attrs
            ),
            # No start time: the rate falls back to the previous point.
            m.NumberDataPoint(time_unix_nano=now, as_double=0.5 * step),
        ],
    )
    restart = step // 4  # a new start time every fourth step: a reset
    cumulative = m.Sum(
        aggregation_temporality=m.AGGREGATION_TEMPORALITY_CUMULATIVE,
        is_monotonic=True,
        data_points=[
            m.NumberDataPoint(
                start_time_unix_nano=T0_NS + restart * 40 * S - S,
                time_unix_nano=now,
                as_double=float((step % 4) * 3 + 1),
            )
        ],
    )
    histogram = m.Histogram(
        aggregation_temporality=m.AGGREGATION_TEMPORALITY_DELTA,
        data_points=[
            m.HistogramDataPoint(
                start_time_unix_nano=now - 10 * S,
                time_unix_nano=now,
                count=2,
                sum=float(step),
                bucket_counts=[1, 1],
                explicit_bounds=[1.0],
            )
        ],
    )
    gauge = m.Gauge(data_points=[m.NumberDataPoint(time_unix_nano=now, as_double=float(step))])
    metrics = [
        m.Metric(name="d", sum=delta),
        m.Metric(name="c", sum=cumulative),
        m.Metric(name="h", histogram=histogram),
        m.Metric(name="g", gauge=gauge),
    ]
    data = m.MetricsData(
        resource_metrics=[m.ResourceMetrics(scope_metrics=[m.ScopeMetrics(metrics=metrics)])]
    )
    serialized: bytes = data.SerializeToString()
    return serialized


def _producers(minutes: range, instance: str, latency: float) -> list[Push]:
    pushes = []
    for minute in minutes:
        at_us = T0_US + minute * 60_000_000
        payload = producer_payload(at_us * 1000, minute, latency=latency)
        pushes.append(Push(at_us, instance, payload, client_id="app-" + instance[-1]))
    return [
        Push(
            p.received_at_us, p.client_instance_id, p.payload, p.client_id, push_interval_ms=60_000
        )
        for p in pushes
    ]


def _mixed(steps: range) -> list[Push]:
    return [
        Push(T0_US + step * 10_000_000 + 7, MIXED, mixed_payload(step, swap=step % 3 == 1))
        for step in steps
    ]


def golden_batches() -> list[list[Push]]:
    """The landed files of the golden run, in landing order (one micro-batch each)."""
    consumer = (FIXTURES / "consumer-push.otlp.bin").read_bytes()
    return [
        [
            *_producers(range(0, 3), SLOW, 6000.0),
            *_producers(range(0, 3), FAST, 10.0),
            *_mixed(range(0, 5)),
            Push(T0_US + 30_000_000, CONSUMER, consumer, client_id="consumer-1"),
            Push(T0_US + 1_000_000, EMPTY, b"", client_id="idle"),
        ],
        [
            *_producers(range(3, 5), SLOW, 7000.0),
            *_producers(range(3, 4), FAST, 10.0),
            *_mixed(range(5, 9)),
            Push(T0_US + 61_000_000, EMPTY, b"", client_id="idle"),
            Push(T0_US + 250_000_000, FAST, b"", client_id="app-b", terminating=True),
        ],
        [*_producers(range(5, 8), SLOW, 10.0)],
    ]


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        # Spark's own writer leaves INT96 timestamps, read back without a zone: UTC.
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, list) and value and isinstance(value[0], tuple):
        return {k: _plain(v) for k, v in sorted(value)}  # a map
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def read_table(root: Path, name: str) -> pa.Table:
    """A table as written under ``root`` (its ``date=`` directories as a column)."""
    files = sorted(str(p) for p in (root / name).rglob("*.parquet"))
    dataset = ds.dataset(
        files, format="parquet", partitioning="hive", partition_base_dir=str(root / name)
    )
    return dataset.to_table()


def canonical_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The table's rows as plain JSON values (maps as sorted objects), in a fixed order."""
    rows = [{k: _plain(v) for k, v in sorted(row.items())} for row in table.to_pylist()]
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


def golden_rows(name: str) -> list[dict[str, Any]]:
    """The golden rows of one table."""
    lines = (GOLDEN / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def record(tables_root: Path) -> None:
    """Write the golden files from a run's tables."""
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        rows = canonical_rows(read_table(tables_root, name))
        text = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)
        (GOLDEN / f"{name}.jsonl").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    record(Path(sys.argv[1]))

"""Pipeline-shaped tables written with pyarrow, as Spark writes them (naive INT96-style times)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

NAIVE_NS = pa.timestamp("ns")
STRING_MAP = pa.map_(pa.string(), pa.string())

CLIENTS_SCHEMA = pa.schema(
    [
        ("client_instance_id", pa.string()),
        ("client_id", pa.string()),
        ("client_software_name", pa.string()),
        ("client_software_version", pa.string()),
        ("client_source_address", pa.string()),
        ("client_source_port", pa.int32()),
        ("principal", pa.string()),
        ("node_id", pa.int32()),
        ("push_interval_ms", pa.int32()),
        ("group_id", pa.string()),
        ("group_instance_id", pa.string()),
        ("member_id", pa.string()),
        ("transactional_id", pa.string()),
        ("client_rack", pa.string()),
        ("resource_attributes", STRING_MAP),
        ("first_seen", NAIVE_NS),
        ("last_seen", NAIVE_NS),
        ("last_push", NAIVE_NS),
        ("pushes", pa.int64()),
        ("terminated", pa.bool_()),
        ("silent", pa.bool_()),
    ]
)

POINTS_SCHEMA = pa.schema(
    [
        ("received_at", NAIVE_NS),
        ("client_instance_id", pa.string()),
        ("metric_name", pa.string()),
        ("metric_unit", pa.string()),
        ("kind", pa.string()),
        ("temporality", pa.string()),
        ("start_time", NAIVE_NS),
        ("event_time", NAIVE_NS),
        ("value", pa.float64()),
        ("attributes", STRING_MAP),
        ("series", pa.string()),
        ("cumulative_value", pa.float64()),
        ("rate_per_second", pa.float64()),
    ]
)

ALERTS_SCHEMA = pa.schema(
    [
        ("alert_id", pa.string()),
        ("rule", pa.string()),
        ("status", pa.string()),
        ("client_instance_id", pa.string()),
        ("metric_name", pa.string()),
        ("attributes", STRING_MAP),
        ("labels", STRING_MAP),
        ("started_at", NAIVE_NS),
        ("fired_at", NAIVE_NS),
        ("resolved_at", NAIVE_NS),
        ("peak", pa.float64()),
        ("op", pa.string()),
        ("threshold", pa.float64()),
        ("duration_seconds", pa.float64()),
    ]
)

LATENCY = "org.apache.kafka.producer.node.request.latency.avg"
REQUESTS = "org.apache.kafka.producer.request.total"


def naive(moment: datetime) -> datetime:
    """Spark's INT96 timestamps come back naive, meaning UTC."""
    return moment.astimezone(UTC).replace(tzinfo=None)


def write(
    tables: Path,
    table: str,
    rows: Sequence[dict[str, Any]],
    schema: pa.Schema,
    day: str = "2026-11-21",
    name: str | None = None,
) -> Path:
    """One Parquet file of a table's ``date=`` partition."""
    folder = tables / table / f"date={day}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"b000000000000-part-{uuid.uuid4().hex[:8]}.snappy.parquet")
    columns = {f.name: [row.get(f.name) for row in rows] for f in schema}
    pq.write_table(pa.table(columns, schema=schema), path)
    return path


def client_row(index: int, now: datetime, **changes: Any) -> dict[str, Any]:
    """A clients-table row for client ``index``."""
    row: dict[str, Any] = {
        "client_instance_id": str(uuid.UUID(int=index + 1)),
        "client_id": f"app-{index:05d}",
        "client_software_name": "confluent-kafka-python" if index % 2 else "librdkafka",
        "client_software_version": "2.16.1",
        "client_source_address": f"10.0.{index // 250}.{index % 250}",
        "client_source_port": 40000 + index,
        "principal": "User:alice" if index % 3 == 0 else "User:bob",
        "node_id": 0,
        "push_interval_ms": 5000,
        "group_id": f"group-{index % 7}" if index % 2 else None,
        "resource_attributes": [],
        "first_seen": naive(now - timedelta(minutes=10)),
        "last_seen": naive(now - timedelta(seconds=index % 60)),
        "last_push": naive(now - timedelta(seconds=index % 60)),
        "pushes": 100 + index,
        "terminated": False,
        "silent": False,
    }
    row.update(changes)
    return row


def point_rows(
    instance: str, start: datetime, count: int, nodes: Sequence[int] = (1, 2)
) -> list[dict[str, Any]]:
    """Latency gauges per node and a cumulative request counter, one set every 5 s."""
    rows: list[dict[str, Any]] = []
    for step in range(count):
        moment = start + timedelta(seconds=5 * step)
        for node in nodes:
            rows.append(
                {
                    "received_at": naive(moment),
                    "client_instance_id": instance,
                    "metric_name": LATENCY,
                    "kind": "gauge",
                    "event_time": naive(moment),
                    "value": 10.0 * node + step,
                    "attributes": [("node.id", str(node))],
                    "series": f"{instance}|{LATENCY}|node.id={node}",
                }
            )
        rows.append(
            {
                "received_at": naive(moment),
                "client_instance_id": instance,
                "metric_name": REQUESTS,
                "kind": "sum",
                "temporality": "cumulative",
                "start_time": naive(start - timedelta(minutes=1)),
                "event_time": naive(moment),
                "value": 50.0 * step,
                "attributes": [],
                "series": f"{instance}|{REQUESTS}|",
                "cumulative_value": 50.0 * step,
                "rate_per_second": 10.0 if step else None,
            }
        )
    return rows


def alert_events(
    instance: str, fired: datetime, resolved: datetime | None, rule: str, node: int = 1
) -> list[dict[str, Any]]:
    """A ``firing`` event and, when ``resolved`` is given, its ``resolved`` event."""
    labels = [
        ("client_instance_id", instance),
        ("client_id", "app-00000"),
        ("principal", "User:alice"),
        ("client_source_address", "10.0.0.0"),
        ("client_software_name", "librdkafka"),
        ("transactional_id", "tx-9"),
    ]
    base = {
        "alert_id": uuid.uuid5(uuid.NAMESPACE_OID, rule + instance).hex,
        "rule": rule,
        "client_instance_id": instance,
        "metric_name": LATENCY,
        "attributes": [("node.id", str(node))],
        "labels": labels,
        "started_at": naive(fired - timedelta(seconds=180)),
        "fired_at": naive(fired),
        "peak": 9100.0,
        "op": ">",
        "threshold": 5000.0,
        "duration_seconds": 180.0,
    }
    events = [{**base, "status": "firing", "resolved_at": None}]
    if resolved is not None:
        events.append({**base, "status": "resolved", "resolved_at": naive(resolved)})
    return events


@dataclass
class DataDir:
    """A data directory with tables for ``clients`` clients, two with points and alerts."""

    root: Path
    now: datetime
    clients: int = 120
    ids: list[str] = field(default_factory=list)

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    def build(self) -> DataDir:
        rows = [client_row(i, self.now) for i in range(self.clients)]
        rows[3].update(last_seen=naive(self.now - timedelta(minutes=5)), silent=False)
        rows[4].update(last_seen=naive(self.now - timedelta(minutes=5)), terminated=True)
        write(self.tables, "clients", rows, CLIENTS_SCHEMA)
        self.ids = [row["client_instance_id"] for row in rows]
        start = self.now - timedelta(minutes=4)
        write(self.tables, "points", point_rows(self.ids[0], start, 40), POINTS_SCHEMA)
        write(self.tables, "points", point_rows(self.ids[1], start, 40, nodes=(3,)), POINTS_SCHEMA)
        events = alert_events(self.ids[0], self.now - timedelta(minutes=1), None, "slow-requests")
        events += alert_events(
            self.ids[1], self.now - timedelta(minutes=3), self.now - timedelta(minutes=2), "slow"
        )
        write(self.tables, "alerts", events, ALERTS_SCHEMA)
        return self


def write_subscriptions(path: Path, resources: dict[str, dict[str, str]]) -> None:
    """A subscriptions.db in the gateway's SQLite store format."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS client_metrics_configs (name TEXT NOT NULL, key TEXT NOT NULL,"
        " value TEXT NOT NULL, PRIMARY KEY (name, key)) WITHOUT ROWID"
    )
    for name, configs in resources.items():
        for key, value in configs.items():
            conn.execute("INSERT INTO client_metrics_configs VALUES (?, ?, ?)", (name, key, value))
    conn.commit()
    conn.close()

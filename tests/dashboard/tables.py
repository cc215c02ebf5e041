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

from clientmetrics.pipeline.core.schemas import ALERTS_ARROW, CLIENTS_ARROW, POINTS_ARROW

NAIVE_NS = pa.timestamp("ns")


def spark_written(schema: pa.Schema) -> pa.Schema:
    """A core table schema as Spark's Parquet reads back: timestamps naive nanoseconds."""
    return pa.schema(
        [f.with_type(NAIVE_NS) if pa.types.is_timestamp(f.type) else f for f in schema]
    )


CLIENTS_SCHEMA = spark_written(CLIENTS_ARROW)
POINTS_SCHEMA = spark_written(POINTS_ARROW)
ALERTS_SCHEMA = spark_written(ALERTS_ARROW)

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
    instance: str,
    fired: datetime,
    resolved: datetime | None,
    rule: str,
    node: int = 1,
    resolution: str = "cleared",
) -> list[dict[str, Any]]:
    """A ``firing`` event and, when ``resolved`` is given, its ``resolved`` event (and why)."""
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
    events = [{**base, "status": "firing", "resolved_at": None, "resolution": None}]
    if resolved is not None:
        events.append(
            {**base, "status": "resolved", "resolved_at": naive(resolved), "resolution": resolution}
        )
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
        rows[0].update(standard_metrics=[LATENCY, REQUESTS])
        write(self.tables, "clients", rows, CLIENTS_SCHEMA)
        self.ids = [row["client_instance_id"] for row in rows]
        start = self.now - timedelta(minutes=4)
        write(self.tables, "points", point_rows(self.ids[0], start, 40), POINTS_SCHEMA)
        write(self.tables, "points", point_rows(self.ids[1], start, 40, nodes=(3,)), POINTS_SCHEMA)
        events = alert_events(self.ids[0], self.now - timedelta(minutes=1), None, "slow-requests")
        events += alert_events(
            self.ids[1],
            self.now - timedelta(minutes=3),
            self.now - timedelta(minutes=2),
            "slow",
            resolution="expired",
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


def write_findings(data: DataDir) -> None:
    """Findings' alert events: clients 5-7 slow to broker 3 (open; client 7's since
    11:50), client 8's slow processing (resolved)."""
    events = []
    for n in (5, 6, 7):
        events += alert_events(
            data.ids[n],
            data.now - timedelta(minutes=n),
            None,
            "slow-broker-requests/consumer",
            node=3,
        )
    events += alert_events(
        data.ids[8],
        data.now - timedelta(minutes=9),
        data.now - timedelta(minutes=8),
        "slow-processing",
    )
    write(data.tables, "alerts", events, ALERTS_SCHEMA)

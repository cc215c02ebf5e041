"""Read what the gateway landed, as a user of the landing contract would."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData


def landed_table(data_dir: Path) -> pa.Table:
    root = data_dir / "landing" / "pushes"
    if not root.exists():
        return pa.table({})
    files = [p for p in root.rglob("*.parquet") if not p.name.startswith((".", "_"))]
    if not files:
        return pa.table({})
    return ds.dataset([str(p) for p in files], format="parquet", partitioning=None).to_table()


def metric_names(payload: bytes) -> set[str]:
    data = MetricsData()
    data.ParseFromString(payload)
    return {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


def landed_rows(data_dir: Path) -> list[dict[str, object]]:
    table = landed_table(data_dir)
    return table.to_pylist() if table.num_rows else []


def names_by_client(data_dir: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for row in landed_rows(data_dir):
        out.setdefault(str(row["client_id"]), set()).update(metric_names(bytes(row["payload"])))  # type: ignore[arg-type]
    return out


def names_of(rows: list[dict[str, object]], client_id: str | None = None) -> set[str]:
    """Every metric name pushed in ``rows`` (by ``client_id`` only, when given)."""
    out: set[str] = set()
    for row in rows:
        if client_id is None or row["client_id"] == client_id:
            out |= metric_names(bytes(row["payload"]))  # type: ignore[arg-type]
    return out


def rows_of(data_dir: Path, client_id: str) -> list[dict[str, object]]:
    """The landed rows of ``client_id``'s pushes."""
    return [r for r in landed_rows(data_dir) if r["client_id"] == client_id]

"""Shared builders for the exporter tests (imported by name; not a conftest)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from clientmetrics.telemetry.model import AcceptedPush

PushFactory = Callable[..., AcceptedPush]
# 2026-03-01T10:59:59.000Z
BASE_MS = 1_772_362_799_000


def build_push(i: int, **overrides: object) -> AcceptedPush:
    """A distinct push numbered ``i`` (client_id ``c<i>``)."""
    fields: dict[str, object] = {
        "received_at_ms": BASE_MS,
        "client_instance_id": uuid.UUID(int=(i + 1) * 0x1000_0000_0000_0001),
        "subscription_id": -5 + i,
        "terminating": i % 2 == 1,
        "client_id": f"c{i}",
        "client_software_name": "librdkafka",
        "client_software_version": "2.16.0",
        "client_source_address": "192.0.2.7",
        "client_source_port": 40000 + i,
        "principal": "User:ANONYMOUS",
        "node_id": 3,
        "listener": "SSL",
        "security_protocol": "SSL",
        "compression_type": 4,
        "push_interval_ms": 30000,
        "payload": bytes([i % 256]) * (i % 7),
    }
    fields.update(overrides)
    return AcceptedPush(**fields)  # type: ignore[arg-type]


def read_landing(data_dir: Path) -> pa.Table:
    """Every landed row, with the hive partition columns, as readers see them."""
    pushes = data_dir / "landing" / "pushes"
    if not pushes.exists():
        return pa.table({})
    return ds.dataset(pushes, format="parquet", partitioning="hive").to_table()


def landed_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "landing" / "pushes").rglob("*"), key=str)


def parquet_files(data_dir: Path) -> list[Path]:
    """The landed files (not their directories)."""
    return [p for p in landed_files(data_dir) if p.is_file()]

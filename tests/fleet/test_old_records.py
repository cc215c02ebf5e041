"""Connection records landed by an older gateway (before consumed and batch counts)
still read: ``clientmetrics fleet`` exports them, their missing counts as 0."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner

from clientmetrics.cli import cli
from clientmetrics.telemetry.connections import (
    ClientKey,
    ConnectionTable,
    landed_connections,
    records_to_arrow,
)

NEW_COLUMNS = ("produced_batches", "consumed_records", "consumed_bytes", "consumed_batches")
AT = int(datetime(2026, 11, 21, 12, 0, tzinfo=UTC).timestamp() * 1000)


def _land(data_dir: Path, name: str, client_id: str, usage: tuple[int, ...], old: bool) -> None:
    table = ConnectionTable(max_keys=10, node_id=1, now_ms=AT - 60_000)
    key = ClientKey("User:app", client_id, "sarama", "1.45", "L", "PLAINTEXT", "10.0.0.7")
    table.observe(key, AT - 1, usage=usage)  # type: ignore[arg-type]
    arrow = records_to_arrow(list(table.drain(AT)))
    if old:  # as the gateway of the last release wrote it
        arrow = arrow.drop_columns(list(NEW_COLUMNS))
    path = landed_connections(data_dir) / "date=2026-11-21" / "hour=12" / f"{name}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(arrow, path)


def test_old_and_new_connection_records_export_together(tmp_path: Path) -> None:
    _land(tmp_path, "old", "before", (7, 700, 0, 0, 0, 0), old=True)
    _land(tmp_path, "new", "after", (3, 300, 3, 2, 200, 1), old=False)
    usage, fleet = tmp_path / "usage.parquet", tmp_path / "fleet.parquet"
    result = CliRunner().invoke(
        cli, ["fleet", "--data-dir", str(tmp_path), "--usage", str(usage), "--out", str(fleet)]
    )
    assert result.exit_code == 0, result.output
    rows = {r["client_id"]: r for r in pq.read_table(usage).to_pylist()}
    assert set(rows) == {"before", "after"}
    # Counted by the old gateway as it was; what it did not count reads as 0.
    assert (rows["before"]["produced_records"], rows["before"]["produced_bytes"]) == (7, 700)
    assert (rows["before"]["consumed_records"], rows["before"]["consumed_bytes"]) == (0, 0)
    assert (rows["after"]["consumed_records"], rows["after"]["consumed_bytes"]) == (2, 200)
    clients = pq.read_table(fleet).column("client_id").to_pylist()
    assert sorted(clients) == ["after", "before"]

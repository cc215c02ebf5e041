"""The table store's snapshot replacement, seen from a reader of the directory."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from clientmetrics.pipeline.spark.storage import TableStore


def _stage(root: Path, batch_id: int, rows: list[int]) -> list[str]:
    path = root / "_staging" / "clients" / str(batch_id) / "date=2026-11-28" / "part-0.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.table({"pushes": rows}), path)
    return [str(path)]


def _snapshot(root: Path) -> list[tuple[str, list[int]]]:
    files = sorted((root / "clients").rglob("*.parquet"))
    return [
        (str(f.relative_to(root / "clients")), pq.read_table(f).column("pushes").to_pylist())
        for f in files
    ]


def test_a_snapshot_is_replaced_whole_and_leaves_nothing_behind(tmp_path: Path) -> None:
    store = TableStore(str(tmp_path))
    store.replace_files(_stage(tmp_path, 3, [1, 2]), "clients", 3)
    assert _snapshot(tmp_path) == [("date=2026-11-28/b000000000003-part-0.parquet", [1, 2])]

    store.replace_files(_stage(tmp_path, 4, [5]), "clients", 4)
    assert _snapshot(tmp_path) == [("date=2026-11-28/b000000000004-part-0.parquet", [5])]
    # Neither the staged copy nor the retired snapshot stays on disk.
    assert [p.name for p in (tmp_path / "_staging").rglob("*.parquet")] == []


def test_a_replayed_batch_replaces_its_own_earlier_try(tmp_path: Path) -> None:
    store = TableStore(str(tmp_path))
    store.replace_files(_stage(tmp_path, 7, [1]), "clients", 7)
    store.clear(str(tmp_path / "_staging" / "clients"))
    store.replace_files(_stage(tmp_path, 7, [9]), "clients", 7)
    assert _snapshot(tmp_path) == [("date=2026-11-28/b000000000007-part-0.parquet", [9])]

"""The run summary counts the points whose value is NaN or ±Inf (no rule judges them)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from clientmetrics.pipeline.run_summary import summarise_run, table_files


def _points(root: Path, name: str, values: list[float | None]) -> None:
    folder = root / "points" / "date=2026-11-21"
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table({"metric_name": ["m"] * len(values), "value": pa.array(values, pa.float64())})
    pq.write_table(table, folder / name)


def test_non_finite_values_are_counted_and_shown(tmp_path: Path) -> None:
    nan, inf = float("nan"), float("inf")
    _points(tmp_path, "b0-old.parquet", [nan, nan])  # before the run: not its output
    before = table_files(tmp_path)
    _points(tmp_path, "b1-a.parquet", [1.0, nan, None, inf])
    _points(tmp_path, "b1-b.parquet", [-inf, 0.0])
    summary = summarise_run(tmp_path, before, 1, ())
    assert (summary.points, summary.non_finite_values) == (6, 3)  # a null is no value at all
    assert summary.as_dict()["non_finite_values"] == 3
    assert summary.lines()[-1] == " NaN/Inf values: 3"
    # None: no line (the usual case keeps its lines).
    clean = summarise_run(tmp_path, table_files(tmp_path), 0, ())
    assert clean.non_finite_values == 0
    assert not [line for line in clean.lines() if "NaN" in line]

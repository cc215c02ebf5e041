"""What one ``pipeline run`` did, read from the table files it added (pyarrow, local paths).

Table files are only ever added by a batch (a replayed batch replaces its own
``b<batch>-`` files), so the files present after a run and not before are this
run's output. Row counts come from the Parquet footers; nothing is recomputed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from clientmetrics.pipeline.core.rejects import counts_by_reason
from clientmetrics.pipeline.core.rules import AlertRule

#: The tables a run appends to (``clients`` is a snapshot, counted whole).
APPENDED = ("points", "client_windows", "alerts", "rejected")


def table_files(root: Path) -> dict[str, set[Path]]:
    """The data files of each appended table under ``root`` (a local tables root)."""
    return {table: set(_data_files(root / table)) for table in APPENDED}


def _data_files(table: Path) -> Iterable[Path]:
    for path in sorted(table.glob("date=*/*.parquet")):
        if not path.name.startswith(("_", ".")):
            yield path


def _rows(paths: Iterable[Path]) -> int:
    return sum(pq.ParquetFile(path).metadata.num_rows for path in paths)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Counts for one run: its micro-batches, and the rows it added to each table."""

    batches: int
    points: int
    windows: int
    alerts_firing: int
    alerts_resolved: int
    clients: int
    #: Rules whose metric matched none of the points this run wrote: rule -> metric.
    unmatched_rules: Mapping[str, str]
    #: Records and points this run left out (the ``rejected`` table), by reason.
    rejected: Mapping[str, int]
    #: Points whose value is NaN or ±Inf (no measurement: no rule judges them).
    non_finite_values: int = 0

    def lines(self) -> list[str]:
        """The summary for people, one count a line."""
        rows = [
            ("batches", self.batches),
            ("points", self.points),
            ("windows", self.windows),
            ("alerts firing", self.alerts_firing),
            ("alerts resolved", self.alerts_resolved),
            ("clients", self.clients),
            ("rejected", sum(self.rejected.values())),
        ]
        rows += [(f"  {reason}", count) for reason, count in sorted(self.rejected.items())]
        if self.non_finite_values:  # a line only when there are some: they are rare
            rows.append(("NaN/Inf values", self.non_finite_values))
        return [f"{name:>15}: {value}" for name, value in rows]

    def as_dict(self) -> dict[str, object]:
        """The summary as JSON-ready values."""
        values = asdict(self)
        values["unmatched_rules"] = dict(self.unmatched_rules)
        values["rejected"] = dict(sorted(self.rejected.items()))
        return values


def summarise_run(
    root: Path,
    before: Mapping[str, set[Path]],
    batches: int,
    rules: Sequence[AlertRule],
) -> RunSummary:
    """The summary of a run over the tables under ``root``, given the files before it."""
    after = table_files(root)
    added = {table: sorted(after[table] - before.get(table, set())) for table in APPENDED}
    firing = resolved = 0
    for path in added["alerts"]:
        status = pq.read_table(path, columns=["status"]).column("status")
        counts = {row["values"]: row["counts"] for row in pc.value_counts(status).to_pylist()}
        firing += counts.get("firing", 0)
        resolved += counts.get("resolved", 0)
    points = _rows(added["points"])
    return RunSummary(
        batches=batches,
        points=points,
        windows=_rows(added["client_windows"]),
        alerts_firing=firing,
        alerts_resolved=resolved,
        clients=_rows(_data_files(root / "clients")),
        unmatched_rules=_unmatched(added["points"], rules) if points else {},
        rejected=_rejected(added["rejected"]),
        non_finite_values=sum(map(_non_finite, added["points"])),
    )


def _rejected(paths: Sequence[Path]) -> dict[str, int]:
    tables = [pq.read_table(path, columns=["reason", "count"]) for path in paths]
    return counts_by_reason(pa.concat_tables(tables)) if tables else {}


def _non_finite(path: Path) -> int:
    values = pq.read_table(path, columns=["value"]).column("value")
    return int(pc.sum(pc.invert(pc.is_finite(values))).as_py() or 0)  # nulls are not counted


def _unmatched(points: Sequence[Path], rules: Sequence[AlertRule]) -> dict[str, str]:
    names: set[str] = set()
    for path in points:
        column = pq.read_table(path, columns=["metric_name"]).column("metric_name")
        names.update(str(name) for name in pc.unique(column).to_pylist() if name is not None)
    return {
        rule.name: rule.metric
        for rule in rules
        if not any(
            name.startswith(rule.metric) if rule.is_prefix else name == rule.metric
            for name in names
        )
    }


__all__ = ["APPENDED", "RunSummary", "summarise_run", "table_files"]

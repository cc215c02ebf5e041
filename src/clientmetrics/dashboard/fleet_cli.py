"""``clientmetrics fleet``: export the fleet and its usage as Parquet or CSV (chargeback)."""

from __future__ import annotations

import time
from pathlib import Path

import click
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from clientmetrics.cli_options import DEFAULT_DATA_DIR, CommandError, data_dir_option
from clientmetrics.dashboard.fleet import FleetSource, read_connections
from clientmetrics.dashboard.tables import TableReader
from clientmetrics.pipeline.core.fleet import landed_connections
from clientmetrics.pipeline.core.schemas import LANDED_FILES
from clientmetrics.pipeline.core.usage import usage_table

_RECENT_S = 900.0


def _write(table: pa.Table, path: Path) -> None:
    """Parquet or CSV, by the file's suffix; lists are joined with ``;`` in CSV."""
    if path.suffix == ".parquet":
        pq.write_table(table, path)
        return
    if path.suffix != ".csv":
        raise CommandError(f"clientmetrics fleet: {path} must end in .parquet or .csv")
    flat = table
    for index, field in enumerate(table.schema):
        if pa.types.is_list(field.type):
            joined = pa.array([";".join(v or []) for v in table.column(index).to_pylist()])
            flat = flat.set_column(index, field.name, joined)
    pacsv.write_csv(flat, path)


@click.command()
@data_dir_option("The gateway's data directory (landing zone, tables).", default=DEFAULT_DATA_DIR)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="The fleet's file.")
@click.option(
    "--usage",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Usage per day and client instance: counted by the proxy (connection records) "
    "and from pushed metrics (the points table).",
)
def fleet(data_dir: Path, out: Path | None, usage: Path | None) -> None:
    """Export every client (docs/fleet.md) and its usage, as .parquet or .csv files."""
    if not data_dir.is_dir():
        raise CommandError(f"clientmetrics fleet: data directory {data_dir} does not exist")
    tables = TableReader(data_dir / "tables")
    if out is not None:
        table, _seen = FleetSource(data_dir, tables, time.time, _RECENT_S).fleet()
        _write(table, out)
        click.echo(f"fleet: {table.num_rows} clients -> {out}")
    if usage is not None:
        records = TableReader(landed_connections(data_dir), pattern=LANDED_FILES)
        table = usage_table(tables.read("points"), read_connections(records))
        _write(table, usage)
        click.echo(f"usage: {table.num_rows} rows -> {usage}")

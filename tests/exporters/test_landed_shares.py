"""Landed files keep their rows in row groups by share, so a pipeline task reads only its own.

A share is a CRC-32 of the instance id's text modulo the share count (one rule,
``push_arrow.shares``): modulo 16 it is the CRC's last hex digit. For
``build_push(i)``'s instance ids, i = 0..5, the CRC-32s (zlib, the standard
polynomial) are 0x71f0215c, 0xbb632b62, 0x4bc2d0b7, 0xf534395f, 0x0595c28a and
0xcf06c8b4: shares 12, 2, 7, 15, 10 and 4 of 16.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from landing_helpers import build_push, parquet_files

from clientmetrics.exporters import LandingExporter, LandingOptions
from clientmetrics.exporters.landing_files import write_landed
from clientmetrics.pipeline.spark.files import read_landed_share
from clientmetrics.pipeline.spark.tasks import PUSH_COLUMNS
from clientmetrics.telemetry.push_arrow import SHARES_KEY, shares


def test_an_instance_share_is_the_crc32_of_its_id_and_a_null_id_is_in_share_0() -> None:
    # zlib.crc32(b"a") = 0xE8B7BE43 = 3904355907 = 3 * 1301451969 + 0
    # zlib.crc32(b"b") = 0x71BEEFF9 = 1908338681 = 3 * 636112893 + 2
    ids = pa.chunked_array([["a", "b"], [None, "a", "b"]])
    assert shares(ids, 3).to_pylist() == [0, 2, 0, 0, 2]
    assert shares(ids, 1).to_pylist() == [0] * 5
    assert shares(ids, 16).to_pylist() == [3, 9, 0, 3, 9]  # the CRCs' last hex digits


def test_every_process_puts_an_instance_in_the_same_share() -> None:
    names = [f"instance-{n}" for n in range(50)]
    here = shares(pa.array(names), 7).to_pylist()
    code = (
        "import pyarrow as pa; from clientmetrics.telemetry.push_arrow import shares; "
        f"print(shares(pa.array({names!r}), 7).to_pylist())"
    )
    for seed in ("1", "2"):
        other = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        )
        assert other.stdout.strip() == str(here)


async def _land(tmp_path: Path) -> Path:
    """Pushes c0..c5 and c6 (c0's instance, after it), landed by the exporter as one file."""
    pushes = [build_push(i) for i in range(6)]
    pushes.append(build_push(6, client_instance_id=pushes[0].client_instance_id))
    exporter = LandingExporter(tmp_path, LandingOptions())
    await exporter.start()
    for push in pushes:
        await exporter.export(push)
    await exporter.close(timeout_s=60)
    (landed,) = parquet_files(tmp_path)
    return landed


def _client_ids(table: pa.Table) -> list[str]:
    return [str(name) for name in table.column("client_id").to_pylist()]


async def test_a_landed_file_has_a_row_group_per_share_named_in_its_metadata(
    tmp_path: Path,
) -> None:
    parquet = pq.ParquetFile(await _land(tmp_path))
    assert parquet.metadata.metadata[SHARES_KEY] == b"2:1,4:1,7:1,10:1,12:2,15:1"
    groups = [_client_ids(parquet.read_row_group(g)) for g in range(parquet.num_row_groups)]
    # Ordered by share; a share's rows (c0 then c6, one instance) in the order they came.
    assert groups == [["c1"], ["c5"], ["c2"], ["c4"], ["c0", "c6"], ["c3"]]


async def test_a_task_reads_only_its_shares_row_groups_and_every_receipt_time(
    tmp_path: Path,
) -> None:
    landed = str(await _land(tmp_path))
    expected = {  # (share, count): the rows read; shares 2 4 7 10 12 15 modulo count
        (0, 2): ["c1", "c5", "c4", "c0", "c6"],
        (1, 2): ["c2", "c3"],
        (0, 4): ["c5", "c0", "c6"],
        (1, 4): [],
        (2, 4): ["c1", "c4"],
        (3, 4): ["c2", "c3"],
    }
    for (share, count), rows in expected.items():
        table, received = read_landed_share(landed, PUSH_COLUMNS, share, count)
        assert _client_ids(table) == rows, (share, count)
        assert table.schema == PUSH_COLUMNS
        assert len(received) == 7, "every share knows the batch's newest push"
    # 3 does not divide 16: the file's shares say nothing of it, every row is read.
    table, _ = read_landed_share(landed, PUSH_COLUMNS, 1, 3)
    assert table.num_rows == 7


async def test_a_file_that_does_not_name_its_shares_is_read_whole(tmp_path: Path) -> None:
    whole = pq.read_table(await _land(tmp_path))
    plain = tmp_path / "plain.parquet"
    pq.write_table(whole.replace_schema_metadata(None), plain)  # another writer's file
    lying = tmp_path / "lying.parquet"  # names three row groups of a file with one
    pq.write_table(whole.replace_schema_metadata({SHARES_KEY: b"0:3,1:3,2:1"}), lying)
    # Rewritten with another file's key kept: its one row group has 7 rows, the key says 6.
    kept = tmp_path / "kept.parquet"
    pq.write_table(whole.replace_schema_metadata({SHARES_KEY: b"2:6"}), kept)
    garbled = tmp_path / "garbled.parquet"
    pq.write_table(whole.replace_schema_metadata({SHARES_KEY: b"zero"}), garbled)
    for path in (plain, lying, kept, garbled):
        table, received = read_landed_share(str(path), PUSH_COLUMNS, 1, 2)
        assert table.num_rows == 7, path.name
        assert len(received) == 7, path.name


async def test_a_file_without_receipt_times_reads_them_as_null(tmp_path: Path) -> None:
    """A column the file lacks is null, as the pass's other reads give it: its pushes
    are then dead letters (``invalid_received_at``), not a batch that fails."""
    whole = pq.read_table(await _land(tmp_path)).drop_columns(["received_at"])
    named = tmp_path / "named.parquet"  # its row groups by share, the key naming them
    write_landed(whole, named)
    plain = tmp_path / "plain.parquet"
    pq.write_table(whole.replace_schema_metadata(None), plain)
    for path, rows in ((named, ["c1", "c5", "c4", "c0", "c6"]), (plain, None)):
        table, received = read_landed_share(str(path), PUSH_COLUMNS, 0, 2)
        if rows is not None:
            assert _client_ids(table) == rows
        assert table.column("received_at").null_count == table.num_rows
        assert received.to_pylist() == [None] * 7, path.name

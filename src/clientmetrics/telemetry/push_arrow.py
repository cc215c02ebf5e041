"""The landing contract: its Arrow schema, derived from ``AcceptedPush``'s fields, and where
its files go (``DATA/landing/pushes/date=YYYY-MM-DD/hour=HH/``, docs/landing.md).

Paths only: nothing here touches the file system.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.telemetry.model import PUSH_FIELDS, Kind

#: Arrow type of each field kind (UUIDs as canonical text, times in UTC microseconds).
ARROW_TYPES: dict[Kind, pa.DataType] = {
    Kind.TIMESTAMP_MS: pa.timestamp("us", tz="UTC"),
    Kind.UUID: pa.string(),
    Kind.BOOL: pa.bool_(),
    Kind.INT8: pa.int8(),
    Kind.INT32: pa.int32(),
    Kind.TEXT: pa.string(),
    Kind.BYTES: pa.binary(),
}

#: The landing contract (docs/landing.md): one column per ``AcceptedPush`` field.
LANDING_ARROW = pa.schema([pa.field(f.column, ARROW_TYPES[f.kind]) for f in PUSH_FIELDS])


#: The landing zone under a gateway's data directory, and its pushes under it.
LANDING_DIR = "landing"
PUSHES_DIR = "pushes"
#: Hive-style partitions of the pushes: a file's UTC date and hour.
PARTITION_COLUMNS = ("date", "hour")
#: Every landed file, relative to the pushes directory.
LANDED_FILES = "date=*/hour=*/*.parquet"


class _Moment(Protocol):
    def strftime(self, format: str, /) -> str: ...


def landed_pushes(data_dir: Path) -> Path:
    """``DATA/landing/pushes``: where the Parquet files of a gateway's pushes land."""
    return data_dir / LANDING_DIR / PUSHES_DIR


def partition(when: _Moment) -> str:
    """``date=YYYY-MM-DD/hour=HH`` of a UTC moment (a ``datetime``)."""
    return when.strftime("date=%Y-%m-%d/hour=%H")


# --- shares: which rows a reader of one share needs --------------------------------------------

#: A landed file keeps its rows in row groups by share of this many: a reader
#: taking one share of a divisor of it (1, 2, 4, 8 or 16 shares) reads only
#: that share's row groups. 16: enough for a pipeline's cores, few enough that
#: a small file's footer stays small (a row group per share it holds).
LANDED_SHARES = 16
#: The file's key-value metadata: each row group's share, of ``LANDED_SHARES``, and
#: its rows (``2:10,4:3``), so that a file rewritten with the key kept (its rows
#: regrouped) is not mistaken for one whose row groups the key names.
SHARES_KEY = b"clientmetrics.row_group_shares"


def shares(instances: pa.Array | pa.ChunkedArray, count: int) -> pa.Array:
    """Which of ``count`` shares each row's instance falls in: the same in every process.

    A CRC-32 of the instance id, taken once per distinct id; a null id is in share 0.
    """
    encoded = pc.dictionary_encode(instances)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    of_id = pa.array(
        [zlib.crc32(name.encode()) % count for name in encoded.dictionary.to_pylist()],
        pa.int32(),
    )
    found: pa.Array = pc.fill_null(pc.take(of_id, encoded.indices), 0)
    return found


@dataclass(frozen=True, slots=True)
class ShareGroups:
    """Landing rows ordered by share (of ``LANDED_SHARES``), and where each share's run is."""

    table: pa.Table
    #: (share, first row, rows) of each run, in order: one row group each.
    runs: tuple[tuple[int, int, int], ...]

    def metadata(self) -> dict[bytes, bytes]:
        """The file's key-value metadata naming each row group's share and rows."""
        runs = ",".join(f"{share}:{rows}" for share, _, rows in self.runs)
        return {SHARES_KEY: runs.encode()}


def share_groups(table: pa.Table) -> ShareGroups:
    """``table``'s rows by share of their instance, each share's rows in their order."""
    of_row = shares(table.column("client_instance_id"), LANDED_SHARES)
    order = pc.sort_indices(of_row)  # stable: a share's rows keep their order
    ordered = pc.take(of_row, order).to_numpy()
    starts = [0, *(np.flatnonzero(np.diff(ordered)) + 1).tolist()]
    ends = [*starts[1:], len(ordered)]
    runs = tuple((int(ordered[a]), a, b - a) for a, b in zip(starts, ends, strict=True) if b > a)
    return ShareGroups(table.take(order), runs)


def share_row_groups(
    metadata: Mapping[bytes, bytes] | None, group_rows: Sequence[int], share: int, count: int
) -> list[int] | None:
    """The row groups of a landed file that hold share ``share`` of ``count``.

    ``group_rows``: the file's row groups' row counts. None when the file does
    not say (another writer, or a key whose row groups are not the file's: another
    count, other sizes) or ``count`` does not divide ``LANDED_SHARES``: then the
    reader reads every row group. The metadata only spares reading: a reader
    still keeps only its share's rows.
    """
    if LANDED_SHARES % count or not metadata or SHARES_KEY not in metadata:
        return None
    try:
        named = [tuple(map(int, run.split(b":"))) for run in metadata[SHARES_KEY].split(b",")]
    except ValueError:
        return None
    if [run[1:] for run in named] != [(rows,) for rows in group_rows]:
        return None
    if any(not 0 <= run[0] < LANDED_SHARES for run in named):
        return None
    return [group for group, run in enumerate(named) if run[0] % count == share]

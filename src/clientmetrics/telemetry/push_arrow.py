"""The landing contract: its Arrow schema, derived from ``AcceptedPush``'s fields, and where
its files go (``DATA/landing/pushes/date=YYYY-MM-DD/hour=HH/``, docs/landing.md).

Paths only: nothing here touches the file system.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import pyarrow as pa

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

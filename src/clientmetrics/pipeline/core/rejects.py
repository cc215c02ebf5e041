"""What the pipeline will not use, and why: the checks on values clients and producers control.

Every push (a landed row or a topic record) and every data point is checked
where it enters the core; what fails is left out, one dead letter
(``REJECTED_ARROW``) says where it was and why, and the rest goes on. A
rejected push makes no client. The reasons (``REASONS``) and what each checks
are the table in docs/record-format.md. All of it on whole columns: a check is a
mask, and a rejected row's reason is that of its first failed check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.arrays import flags
from clientmetrics.pipeline.core.schemas import ORIGIN_ARROW, REJECTED_ARROW

#: Why something was skipped (the ``reason`` column), in the order the checks run.
HEADER_NOT_UTF8 = "header_not_utf8"
INVALID_HEADER = "invalid_header"
INVALID_INSTANCE_ID = "invalid_instance_id"
INVALID_RECEIVED_AT = "invalid_received_at"
PAYLOAD_TOO_LARGE = "payload_too_large"
PAYLOAD_NOT_OTLP = "payload_not_otlp"
TOO_MANY_POINTS = "too_many_points"
POINT_TIME_OUT_OF_RANGE = "point_time_out_of_range"
POINT_COUNT_OUT_OF_RANGE = "point_count_out_of_range"
#: A landed file that is not the landing contract's Parquet (corrupt, truncated, or a
#: column of another type): one dead letter for the file, whose rows are not known.
UNREADABLE_FILE = "unreadable_file"
REASONS = (
    HEADER_NOT_UTF8,
    INVALID_HEADER,
    INVALID_INSTANCE_ID,
    INVALID_RECEIVED_AT,
    PAYLOAD_TOO_LARGE,
    PAYLOAD_NOT_OTLP,
    TOO_MANY_POINTS,
    POINT_TIME_OUT_OF_RANGE,
    POINT_COUNT_OUT_OF_RANGE,
    UNREADABLE_FILE,
)

#: The instance id as both writers spell it: canonical, lower-case UUID text.
INSTANCE_ID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
#: Receipt times outside these (µs since the epoch: 2000-01-01 and 2100-01-01) are garbage.
EARLIEST_RECEIVED_US = 946_684_800_000_000
LATEST_RECEIVED_US = 4_102_444_800_000_000
#: A payload larger than this is not decoded (the gateway's default bound is 1 MiB).
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
#: A push with more data points than this is skipped whole.
MAX_POINTS_PER_PUSH = 100_000
#: How far a point's time may be after its push's receipt (client clocks drift); a
#: point's time may be as old as ``EARLIEST_RECEIVED_US`` (a replayed or delayed push
#: carries old points, and an old point moves no watermark).
POINT_AHEAD_US = 3_600 * 1_000_000
#: The dead letter keeps this much of the value at fault.
EXCERPT_BYTES = 256


@dataclass(frozen=True, slots=True)
class Check:
    """One rule over rows: where it fails, why, which value, and that value (any type)."""

    failed: np.ndarray
    reason: str
    field: str
    value: pa.Array | pa.ChunkedArray


@dataclass(frozen=True, slots=True)
class Screened:
    """Rows split: those kept, and the dead letters of the others (``REJECTED_ARROW``)."""

    kept: pa.Table
    rejected: pa.Table


def excerpt(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The first ``EXCERPT_BYTES`` of each value, as bytes (text in UTF-8, numbers as text)."""
    if not (pa.types.is_binary(values.type) or pa.types.is_string(values.type)):
        values = pc.cast(values, pa.string())
    return pc.binary_slice(pc.cast(values, pa.binary()), 0, EXCERPT_BYTES)


def received_ok(received_at: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Where a receipt time is a plausible one (in this century)."""
    micros = pc.cast(received_at, pa.int64())
    inside = pc.and_(
        pc.greater_equal(micros, EARLIEST_RECEIVED_US), pc.less(micros, LATEST_RECEIVED_US)
    )
    return flags(inside)


def instance_ok(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Where an instance id is canonical UUID text."""
    return flags(pc.match_substring_regex(ids, INSTANCE_ID_PATTERN))


def push_checks(pushes: pa.Table) -> list[Check]:
    """The checks every push passes, whichever source it came from."""
    ids = pushes.column("client_instance_id")
    payload = pushes.column("payload")
    sizes = pc.fill_null(pc.binary_length(payload), 0)
    return [
        Check(~instance_ok(ids), INVALID_INSTANCE_ID, "client_instance_id", ids),
        Check(
            ~received_ok(pushes.column("received_at")),
            INVALID_RECEIVED_AT,
            "received_at",
            pushes.column("received_at"),
        ),
        Check(flags(pc.greater(sizes, MAX_PAYLOAD_BYTES)), PAYLOAD_TOO_LARGE, "payload", payload),
    ]


def screen(rows: pa.Table, checks: Sequence[Check]) -> Screened:
    """``rows`` less those failing any check, and a dead letter for each of those."""
    failed = np.zeros(rows.num_rows, dtype=bool)
    for check in checks:
        failed |= check.failed
    if not failed.any():
        return Screened(rows, REJECTED_ARROW.empty_table())
    chosen = pa.array(failed)
    size = int(failed.sum())
    reason: pa.Array = pa.nulls(size, pa.string())
    field: pa.Array = pa.nulls(size, pa.string())
    value: pa.Array = pa.nulls(size, pa.binary())
    for check in reversed(checks):  # the first failed check of a row wins
        hit = pa.array(check.failed[failed])
        reason = pc.if_else(hit, pa.scalar(check.reason), reason)
        field = pc.if_else(hit, pa.scalar(check.field), field)
        value = pc.if_else(hit, excerpt(check.value.filter(chosen)), value)
    letters = dead_letters(rows.filter(chosen), reason, field, value)
    return Screened(rows.filter(pc.invert(chosen)), letters)


def dead_letters(
    rows: pa.Table,
    reason: pa.Array | str,
    field: pa.Array | str,
    value: pa.Array | pa.ChunkedArray,
    count: pa.Array | None = None,
) -> pa.Table:
    """``REJECTED_ARROW`` rows for ``rows`` (pushes, with their origin columns if any).

    Only a plausible receipt time and a valid instance id are kept: the others
    are what was wrong, and the excerpt shows them.
    """
    size = rows.num_rows

    def column(name: str, kind: pa.DataType) -> pa.Array | pa.ChunkedArray:
        return rows.column(name) if name in rows.column_names else pa.nulls(size, kind)

    received = column("received_at", REJECTED_ARROW.field("received_at").type)
    ids = column("client_instance_id", pa.string())
    columns = {
        "received_at": pc.if_else(pa.array(received_ok(received)), received, None),
        **{f.name: pc.cast(column(f.name, f.type), f.type) for f in ORIGIN_ARROW},
        "client_instance_id": pc.if_else(pa.array(instance_ok(ids)), ids, None),
        "reason": reason if not isinstance(reason, str) else pa.repeat(pa.scalar(reason), size),
        "field": field if not isinstance(field, str) else pa.repeat(pa.scalar(field), size),
        "excerpt": excerpt(value),
        "count": count if count is not None else pa.repeat(pa.scalar(1, pa.int64()), size),
    }
    return pa.table(
        [pc.cast(columns[f.name], f.type) for f in REJECTED_ARROW], schema=REJECTED_ARROW
    )


def screen_pushes(pushes: pa.Table) -> Screened:
    """Pushes (landing columns) less those whose id, receipt time or payload size is unusable."""
    return screen(pushes, push_checks(pushes))


def unreadable_file(path: str, error: Exception, modified: datetime | None) -> pa.Table:
    """The dead letter of a landed file that cannot be read: its name, the reader's error,
    and as its receipt time the file's modification time (when it landed), if known."""
    received = pa.array([modified], REJECTED_ARROW.field("received_at").type)
    row = with_origin(pa.table({"received_at": received}), source=path)
    text = f"{type(error).__name__}: {error}".encode()
    return dead_letters(row, UNREADABLE_FILE, "file", pa.array([text], pa.binary()))


def with_origin(pushes: pa.Table, **origin: object) -> pa.Table:
    """``pushes`` with the origin columns (``ORIGIN_ARROW``): the given values, else null."""
    size = pushes.num_rows
    for f in ORIGIN_ARROW:
        if f.name in pushes.column_names:
            continue
        value = origin.get(f.name)
        column = (
            pa.nulls(size, f.type) if value is None else pa.repeat(pa.scalar(value, f.type), size)
        )
        pushes = pushes.append_column(f, column)
    return pushes


def counts_by_reason(rejected: pa.Table) -> dict[str, int]:
    """Records and points skipped, by reason, in dead letters (``REJECTED_ARROW`` columns)."""
    if rejected.num_rows == 0:
        return {}
    grouped = rejected.group_by("reason").aggregate([("count", "sum")])
    return {
        str(row["reason"]): int(row["count_sum"] or 0)
        for row in grouped.to_pylist()
        if row["reason"] is not None
    }

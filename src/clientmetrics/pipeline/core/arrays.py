"""Small helpers over Arrow columns: numpy views with nulls filled, runs of equal keys, orders.

Every rule of the core works on whole columns with these; none loops per data point.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.schemas import TIMESTAMP


def filled(array: pa.Array | pa.ChunkedArray, fill: object) -> np.ndarray:
    """The array as numpy, nulls replaced by ``fill``."""
    return np.asarray(pc.fill_null(array, fill).to_numpy(zero_copy_only=False))


def flags(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean array as numpy, nulls as False."""
    return filled(array, False).astype(bool)


def micros(array: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Timestamps as µs since the epoch (0 where null), and where they are valid."""
    as_int = pc.cast(array, pa.int64())
    return filled(as_int, 0).astype(np.int64), flags(pc.is_valid(as_int))


def floats(array: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Numbers as float64 (0 where null), and where they are valid."""
    return filled(array, 0.0).astype(np.float64), flags(pc.is_valid(array))


def timestamps(us: np.ndarray, missing: np.ndarray | None = None) -> pa.Array:
    """µs since the epoch as UTC timestamps (null where ``missing``)."""
    return pa.array(us, pa.int64(), mask=missing).cast(TIMESTAMP)


def runs(*columns: pa.Array | pa.ChunkedArray | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each run of equal keys starts and ends (inclusive)."""
    size = len(columns[0])
    if size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.zeros(size, dtype=bool)
    starts[0] = True
    for column in columns:
        if isinstance(column, np.ndarray):
            starts[1:] |= column[1:] != column[:-1]
        else:
            change = pc.fill_null(pc.not_equal(column[1:], column[:-1]), True)
            starts[1:] |= np.asarray(change.to_numpy(zero_copy_only=False), dtype=bool)
    first = np.flatnonzero(starts)
    return first, np.append(first[1:], size) - 1


def group_order(keys: pa.Array | pa.ChunkedArray, *then: tuple[str, pa.Array]) -> pa.Array:
    """Indices that group rows by ``keys`` (via integer codes) and sort each group by ``then``."""
    encoded = pc.dictionary_encode(keys)
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        "_key": encoded.combine_chunks().indices
        if isinstance(encoded, pa.ChunkedArray)
        else encoded.indices
    }
    columns.update(then)
    table = pa.table(columns)
    return pc.sort_indices(table, [(name, "ascending") for name in table.column_names])


def take_rows(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """Rows of ``table`` at numpy indices."""
    return table.take(pa.array(rows, pa.int64()))


def in_order(table: pa.Table, order: pa.Array, columns: list[str]) -> pa.Table:
    """Narrow columns of ``table`` taken in ``order``; ``_row`` maps each back."""
    narrow = table.select(columns).take(order)
    return narrow.append_column("_row", pc.cast(order, pa.int64()))


def less(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a < b`` where NaN is larger than every number (the core's order for NaN)."""
    result: np.ndarray = (a < b) | (np.isnan(b) & ~np.isnan(a))
    return result

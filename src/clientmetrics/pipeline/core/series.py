"""Series keys and each series' running values, on whole Arrow columns.

A series is one client instance's metric with one set of data-point
attributes; its key is ``instance|metric|k=v,k=v`` (attributes sorted by key,
values as text). The pass sees every series of a batch whole (pushes are
grouped by instance first), so each series' running sum and previous point
are taken here in one sort of integer codes; what a series carries between
batches is joined on in ``rates``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa
import pyarrow.compute as pc

#: Kinds whose ``value`` accumulates (and so has a temporality to normalise).
ACCUMULATING = ("sum", "histogram", "exponential_histogram", "summary")

#: Columns ``with_running_values`` adds, per accumulating point (null for the rest).
RUNNING_FIELDS = (
    pa.field("series", pa.string()),
    # Sum of the series' values up to and including this point, in this table.
    pa.field("_run", pa.float64()),
    # Whether the series has an earlier point in this table, and that point's
    # running sum, value, temporality (delta or not) and event time.
    pa.field("_has_prev", pa.bool_()),
    pa.field("_prev_run", pa.float64()),
    pa.field("_prev_value", pa.float64()),
    pa.field("_prev_delta", pa.bool_()),
    pa.field("_lag_time", pa.timestamp("us", tz="UTC")),
)


def attributes_text(attributes: pa.MapArray) -> pa.Array:
    """Each map's entries as sorted ``key=value`` text, joined by commas.

    A null value gives ``key=``, an empty (or null) map gives the empty string.
    """
    # Offsets are positions in the whole child arrays, even for a slice.
    offsets = attributes.offsets
    first = offsets[0].as_py() if len(offsets) else 0
    size = (offsets[-1].as_py() if len(offsets) else 0) - first
    keys = attributes.keys.slice(first, size)
    items = attributes.items.slice(first, size)
    entries = pc.binary_join_element_wise(keys, pc.fill_null(items, ""), "=")
    # A null map has no entries: its text is empty, like an empty map's.
    lists = pa.ListArray.from_arrays(pc.subtract(offsets, first), entries)
    parents = pc.list_parent_indices(lists)
    flat = pa.table({"p": parents, "k": keys, "e": entries})
    order = pc.sort_indices(flat, [("p", "ascending"), ("k", "ascending"), ("e", "ascending")])
    lists = pa.ListArray.from_arrays(pc.subtract(offsets, first), pc.take(entries, order))
    return pc.binary_join(lists, ",")


#: The series key's separator: ``instance|metric|sorted attributes`` (instance ids and
#: metric names hold no ``|``; the attributes' text may).
SERIES_SEPARATOR = "|"


def series_keys(client_ids: pa.Array, metric_names: pa.Array, attributes: pa.MapArray) -> pa.Array:
    """``instance|metric|sorted attributes``: the series key.

    librdkafka sends one Metric per broker with an int ``node.id`` attribute;
    those copies get distinct keys.
    """
    text = attributes_text(attributes)
    return pc.binary_join_element_wise(
        client_ids, metric_names, text, SERIES_SEPARATOR, null_handling="skip"
    )


def series_instances(series: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The client instance id of each series key."""
    return pc.list_element(pc.split_pattern(series, SERIES_SEPARATOR, max_splits=1), 0)


def series_without_instance(series: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each series key without its instance (``metric|attributes``): the key a cohort's
    members share."""
    key = pc.list_element(pc.split_pattern(series, SERIES_SEPARATOR, max_splits=1), 1)
    return key.combine_chunks() if isinstance(key, pa.ChunkedArray) else key


def series_attributes(series: str) -> str:
    """The attributes' text of one series key (``k=v,k=v``; empty when it has none)."""
    parts = series.split(SERIES_SEPARATOR, 2)
    return parts[2] if len(parts) == 3 else ""


@dataclass(frozen=True, slots=True)
class SeriesOrder:
    """An order that groups a points table by series, in event-time order within each.

    The reductions walk it on integers: runs of equal ``codes`` are one
    series, so no key text is moved or compared.
    """

    #: Row indices of the points, grouped by series and in event-time order.
    rows: np.ndarray
    #: The series code (equal for the rows of one series) at each position of ``rows``.
    codes: np.ndarray

    @property
    def indices(self) -> pa.Array:
        """``rows`` as an Arrow array (for ``take``)."""
        return pa.array(self.rows, pa.int64())


def with_running_values(points: pa.Table) -> pa.Table:
    """Add ``series`` and the per-series running columns (``RUNNING_FIELDS``).

    ``points`` needs ``client_instance_id``, ``metric_name``, ``attributes``,
    ``kind``, ``temporality``, ``value``, ``event_time`` and ``received_at``.
    The result is grouped by series (each series' rows together, series in no
    particular order) and sorted by event time and receipt within each.
    Running columns are null for points whose kind does not accumulate.
    """
    running, order = running_values(points)
    return running.take(order.indices)


def running_values(points: pa.Table) -> tuple[pa.Table, SeriesOrder]:
    """``with_running_values``, left in the input's order, and the order that groups it.

    Reordering a wide table costs more than the rest of the work together: the
    decode pass keeps the rows where they are and groups narrow columns only.
    """
    series = series_keys(
        _array(points, "client_instance_id"),
        _array(points, "metric_name"),
        _array(points, "attributes"),
    )
    # Integer codes sort far faster than the key text, and group the same way.
    codes = pc.dictionary_encode(series).indices
    keyed = pa.table(
        {"c": codes, "t": points.column("event_time"), "r": points.column("received_at")}
    )
    order = pc.sort_indices(keyed, [("c", "ascending"), ("t", "ascending"), ("r", "ascending")])
    points = points.append_column("series", series)
    accumulating = pc.fill_null(pc.is_in(points.column("kind"), pa.array(ACCUMULATING)), False)
    mask = accumulating.to_numpy(zero_copy_only=False)
    sorted_rows = order.to_numpy()
    grouped = SeriesOrder(sorted_rows, codes.to_numpy(zero_copy_only=False)[sorted_rows])
    acc_rows = sorted_rows[mask[sorted_rows]]  # accumulating rows, grouped and in time order
    narrow = points.select(["series", "value", "temporality", "event_time"])
    running = _append_running(narrow.take(pa.array(acc_rows)))
    # Each row's position in ``running``; null for rows that do not accumulate.
    positions = np.full(len(mask), -1, dtype=np.int64)
    positions[acc_rows] = np.arange(len(acc_rows))
    where = pa.array(positions, mask=positions < 0)
    for field in RUNNING_FIELDS[1:]:
        points = points.append_column(field, running.column(field.name).take(where))
    return points, grouped


def _append_running(acc: pa.Table) -> pa.Table:
    size = acc.num_rows
    series = _array(acc, "series")
    starts = np.ones(size, dtype=bool)
    if size > 1:
        starts[1:] = pc.not_equal(series[1:], series[:-1]).to_numpy(zero_copy_only=False)
    group = np.cumsum(starts)
    value = _array(acc, "value")
    valid = pc.is_valid(value).to_numpy(zero_copy_only=False)
    numbers = pc.fill_null(value, 0.0).to_numpy(zero_copy_only=False)
    # pandas sums each group in order, left to right.
    frame = pd.DataFrame(
        {"v": numbers, "n": valid.astype(np.int64), "nan": np.isnan(numbers).astype(np.int64)}
    )
    cumulative = frame.groupby(group, sort=False).cumsum()
    running = cumulative["v"].to_numpy(copy=True)
    running[cumulative["nan"].to_numpy() > 0] = np.nan  # a NaN poisons the rest of the run
    run = pa.array(running, pa.float64(), mask=cumulative["n"].to_numpy() == 0)
    has_prev = pa.array(~starts)
    delta = pc.fill_null(pc.equal(_array(acc, "temporality"), "delta"), False)
    columns = {
        "_run": run,
        "_has_prev": has_prev,
        "_prev_run": _previous(run, starts),
        "_prev_value": _previous(value, starts),
        "_prev_delta": _previous(delta, starts),
        "_lag_time": _previous(_array(acc, "event_time"), starts),
    }
    for field in RUNNING_FIELDS[1:]:
        acc = acc.append_column(field, pc.cast(columns[field.name], field.type))
    return acc


def _previous(array: pa.Array, starts: np.ndarray) -> pa.Array:
    """The element before each one in the same series (null at a series' first)."""
    if len(array) == 0:
        return array
    shifted = pa.concat_arrays([pa.nulls(1, array.type), array.slice(0, len(array) - 1)])
    return pc.if_else(pa.array(starts), pa.nulls(len(array), array.type), shifted)


def _array(table: pa.Table, name: str) -> pa.Array:
    column = table.column(name)
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)

"""One micro-batch's pass over whole client instances: every rule of the pipeline, in order.

The shell partitions a batch's pushes by client instance, with each instance's
carried state (series, open windows, open alert episodes, its inventory row)
as extra rows, and sorts them by instance, so one call sees whole instances.
For each group, on whole Arrow columns (no loop per data point):

1. decode the payloads, leaving out what cannot be used (``decode``, ``rejects``:
   dead letters, the ``rejected`` side output);
2. key the series and normalise temporality to cumulative values and rates (``series``, ``rates``);
3. reduce: window partials merged with the carried windows (``windows``),
   those the previous batch's watermark closed split off (as Structured
   Streaming evicts state with the watermark of the batch before), each
   series' new state, the inventory rows (``clients``), the points' distance
   from their profiles (``baselines``), alert episodes and their events
   (``alerts``);
4. drop the state of instances silent for longer than the retention.

What comes out is the group's points and its side outputs (``SIDE_OUTPUTS``),
ready to be written: the shell only moves rows and files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.alerts import LEAVING, end_with_clients, event_time
from clientmetrics.pipeline.core.baselines import score_points
from clientmetrics.pipeline.core.clients import (
    client_views,
    clients_table,
    clock_changes_at,
    merge_inventory,
    retire,
)
from clientmetrics.pipeline.core.decode import decode_screened
from clientmetrics.pipeline.core.lives import alerts_by_life, silences
from clientmetrics.pipeline.core.rates import merge_series, normalise, series_lasts
from clientmetrics.pipeline.core.rules import AlertRule
from clientmetrics.pipeline.core.schemas import (
    ALERT_STATE_ARROW,
    ALERTS_ARROW,
    BASELINE_STATE_ARROW,
    CARRIED,
    CLIENT_WINDOWS_ARROW,
    CLIENTS_ARROW,
    COHORT_PARTIALS_ARROW,
    COHORT_STATE_ARROW,
    INVENTORY_ARROW,
    PASS_INPUT_ARROW,
    POINTS_ARROW,
    REJECTED_ARROW,
    SERIES_STATE_ARROW,
    WINDOW_STATE_ARROW,
)
from clientmetrics.pipeline.core.series import SeriesOrder, running_values, series_instances
from clientmetrics.pipeline.core.windows import merge_windows, split_windows, window_partials


def _column(name: str) -> Callable[[pa.Table], pa.ChunkedArray]:
    return lambda table: table.column(name)


#: The side outputs of a pass, by name: their schema, and for table rows what
#: time's UTC day partitions them (None: state, unpartitioned).
SIDE_OUTPUTS: dict[str, tuple[pa.Schema, Callable[[pa.Table], pa.ChunkedArray] | None]] = {
    "windows": (WINDOW_STATE_ARROW, None),
    "client_windows": (CLIENT_WINDOWS_ARROW, _column("window_start")),
    "series": (SERIES_STATE_ARROW, None),
    "inventory": (INVENTORY_ARROW, None),
    "alert_state": (ALERT_STATE_ARROW, None),
    "clients": (CLIENTS_ARROW, _column("last_seen")),
    "retired_clients": (INVENTORY_ARROW, _column("last_seen")),
    "alerts": (ALERTS_ARROW, event_time),
    "rejected": (REJECTED_ARROW, _column("received_at")),
    "baselines": (BASELINE_STATE_ARROW, None),
    # Not state of the share: the driver merges them into the cohorts' (``baselines``).
    "cohort_partials": (COHORT_PARTIALS_ARROW, None),
}


@dataclass(frozen=True, slots=True)
class PassPlan:
    """What one micro-batch's pass needs to know, sent to every task."""

    #: Where the batch's files go (when the pass writes them): a directory URI.
    staging: str
    window_seconds: int
    #: Points older than this (µs since the epoch) are late: no window takes them.
    #: It is the previous batch's watermark.
    late_before_us: int | None = None
    #: Windows ending at or before this (µs) close: the previous batch's
    #: watermark, or the end of time for a final run (None closes nothing).
    close_before_us: int | None = None
    rules: tuple[AlertRule, ...] = ()
    #: The newest push received so far, this batch's included (µs): ``silent``'s clock.
    as_of_us: int | None = None
    #: Instances that sent nothing since this (µs) retire: their state is dropped.
    retire_before_us: int | None = None
    #: Points rows buffered before a file is written.
    flush_rows: int = 1_000_000
    #: The cohorts' profiles as the previous batch left them (``COHORT_STATE_ARROW``).
    cohorts: pa.Table | None = None


@dataclass(slots=True)
class GroupResult:
    """What the pass makes of one group of whole instances."""

    points: pa.Table
    sides: dict[str, pa.Table]
    max_event_time: int | None
    #: The earliest clock, later than the plan's, that would judge these clients otherwise.
    clock_changes_at: int | None = None


def instance_of(rows: pa.Table, tag: str | None) -> pa.Array | pa.ChunkedArray:
    """The client instance of each row: of a push or a state row (``tag``: its ``carried`` tag)."""
    if tag in ("series", "baseline"):
        return series_instances(rows.column("series"))
    return rows.column("client_instance_id")


def pass_input(pushes: pa.Table, state: Mapping[str, pa.Table]) -> pa.Table:
    """A pass's rows (``PASS_INPUT_ARROW``) from pushes and carried state, sorted by instance.

    ``state`` holds rows of each carried kind by its tag (``CARRIED``).
    """
    parts = [(pushes, None), *((table, tag) for tag, table in state.items() if table.num_rows)]
    tables = []
    for table, tag in parts:
        size = table.num_rows
        columns = []
        for field in PASS_INPUT_ARROW:
            if field.name == "carried":
                columns.append(pa.repeat(pa.scalar(tag, field.type), size))
            elif field.name == "client_instance_id":
                columns.append(pc.cast(instance_of(table, tag), field.type))
            elif field.name in table.column_names:
                columns.append(pc.cast(table.column(field.name), field.type))
            else:
                columns.append(pa.nulls(size, field.type))
        tables.append(pa.Table.from_arrays(columns, schema=PASS_INPUT_ARROW))
    rows = pa.concat_tables(tables)
    return rows.take(pc.sort_indices(rows.column("client_instance_id")))


def _without(table: pa.Table, instances: pa.Array | pa.ChunkedArray, ids: pa.Array) -> pa.Table:
    return table.filter(pc.invert(pc.is_in(ids, value_set=instances)))


def process_group(rows: pa.Table, plan: PassPlan) -> GroupResult:
    """Every rule, over a group of whole instances (``PASS_INPUT_ARROW`` rows).

    The state side outputs are the instances' whole new state, carried rows
    included (less retired instances').
    """
    carried = rows.column("carried")
    pushes = rows.filter(pc.is_null(carried))
    state = {
        tag: rows.filter(pc.equal(carried, tag)).select(schema.names)
        for tag, schema in CARRIED.items()
    }
    rejected = REJECTED_ARROW.empty_table()
    if pushes.num_rows:
        decoded = decode_screened(pushes)
        pushes, rejected = decoded.pushes, decoded.rejected
        running, order = running_values(decoded.points)
        points = normalise(running, state["series"])
    else:
        points = POINTS_ARROW.empty_table()
        order = SeriesOrder(np.zeros(0, np.int64), np.zeros(0, np.int64))
    highest = pc.max(pc.cast(points.column("event_time"), pa.int64())).as_py()
    partials = window_partials(points, order, plan.window_seconds, plan.late_before_us)
    closed, windows = split_windows(merge_windows(state["window"], partials), plan.close_before_us)
    series = merge_series(state["series"], series_lasts(points, order))
    inventory = merge_inventory(state["client"], client_views(pushes, points))
    kept, retired = retire(inventory, plan.retire_before_us)
    baselines, partials = state["baseline"], COHORT_PARTIALS_ARROW.empty_table()
    if plan.rules:
        cohorts = COHORT_STATE_ARROW.empty_table() if plan.cohorts is None else plan.cohorts
        scored = score_points(points, order, baselines, cohorts, inventory, plan.rules)
        baselines, partials = scored.state, scored.partials
        # Silences inside the batch end episodes as a batch boundary would (``lives``).
        gaps = silences(pushes, state["client"])
        events, still_open = alerts_by_life(
            scored.points, order, state["alert"], plan.rules, inventory, gaps
        )
        # Instances that retire went silent long ago, whatever the clock.
        left, alert_state = end_with_clients(still_open, retired, plan.rules, LEAVING)
        events = pa.concat_tables([events, left])
    else:
        events, alert_state = ALERTS_ARROW.empty_table(), ALERT_STATE_ARROW.empty_table()
    if retired.num_rows:
        gone = retired.column("client_instance_id")
        series = _without(series, gone, series_instances(series.column("series")))
        windows = _without(windows, gone, windows.column("client_instance_id"))
        baselines = _without(baselines, gone, series_instances(baselines.column("series")))
    clients, ended, alert_state = judge_clients(kept, alert_state, plan.rules, plan.as_of_us)
    sides = {
        "windows": windows,
        "client_windows": closed,
        "series": series,
        "inventory": kept,
        "alert_state": alert_state,
        "clients": clients,
        "retired_clients": retired,
        "alerts": pa.concat_tables([events, ended]),
        "rejected": rejected,
        "baselines": baselines,
        "cohort_partials": partials,
    }
    changes_at = clock_changes_at(kept, plan.as_of_us)
    return GroupResult(points, sides, highest, changes_at)


def judge_clients(
    kept: pa.Table, alert_state: pa.Table, rules: tuple[AlertRule, ...], as_of_us: int | None
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """What the clock (the newest push: ``silent``'s) decides, for instances that stay.

    The clients table's rows, the events of open alerts whose client
    terminated or went silent (``alerts.end_with_clients``), and the alert
    state left. ``kept`` is their inventory; ``alert_state`` their open
    episodes. Everything else a pass makes is the same under any clock: a
    share that ran with an earlier clock than the batch's newest push is
    judged again with this alone (``clients.clock_changes_at`` says when).
    """
    if rules:
        ended, alert_state = end_with_clients(alert_state, kept, rules, as_of_us)
    else:
        ended = ALERTS_ARROW.empty_table()
    return clients_table(kept, as_of_us), ended, alert_state


def instance_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    """Tables of whole instances, from batches sorted by ``client_instance_id``.

    Arrow batches end anywhere, so the last instance of each batch is held back
    and joined to the next: an instance is never split between two tables.
    """
    held: list[pa.RecordBatch] = []
    for batch in batches:
        ids = batch.column("client_instance_id")
        last = ids[len(ids) - 1] if len(ids) else None
        cut = pc.index(ids, last).as_py() if last is not None and last.is_valid else 0
        if cut > 0:
            yield pa.Table.from_batches([*held, batch.slice(0, cut)]).combine_chunks()
            held = []
        held.append(batch.slice(cut))
    if held and sum(len(batch) for batch in held):
        yield pa.Table.from_batches(held).combine_chunks()

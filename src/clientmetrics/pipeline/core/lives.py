"""An instance's lives: its pushes split where it went silent, so alerts do not depend on batching.

A client is silent once no push arrived for 3 × its push interval
(``clients.silence_deadlines``); its open alert episodes then end
(``alerts.end_with_clients``: ``expired`` if fired, dropped if not). A batch
learns of a silence from its clock (the newest push of any client) at its
end, but a silence can also lie *between two pushes of one batch*, or
between an instance's carried last push and its first push of this batch.
Judged only at batch ends, the same pushes would make different alerts in a
streaming run (where a batch may end inside the silence) and in one batch
over everything (where it does not). So the alerts pass walks each
instance's *lives* — its points between two silences — in turn, ending the
open episodes at each silence exactly as a batch boundary inside it would.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.alerts import (
    LEAVING,
    alert_events,
    end_with_clients,
    open_episodes,
    rule_candidates,
    track_episodes,
)
from clientmetrics.pipeline.core.arrays import filled, micros, take_rows
from clientmetrics.pipeline.core.clients import silence_deadlines
from clientmetrics.pipeline.core.rules import AlertRule
from clientmetrics.pipeline.core.schemas import ALERTS_ARROW
from clientmetrics.pipeline.core.series import SeriesOrder

#: The silences inside a batch: whose, when its last push before was, that push's
#: interval (so ``silence_deadlines`` says when it went silent) and when it came back.
SILENCES_ARROW = pa.schema(
    [
        ("client_instance_id", pa.string()),
        ("last_seen", pa.int64()),
        ("push_interval_ms", pa.int64()),
        ("resumed_at", pa.int64()),
    ]
)


def silences(pushes: pa.Table, carried: pa.Table) -> pa.Table:
    """Each silence an instance's pushes show (``SILENCES_ARROW``), in instance and time order.

    ``pushes`` are the batch's (``client_instance_id``, ``received_at``,
    ``push_interval_ms``); ``carried`` is the instances' inventory from
    earlier batches, whose ``last_seen`` is the push before this batch's
    first. A terminated instance's last push was its goodbye: no silence follows it.
    """
    live = carried.filter(pc.invert(pc.fill_null(carried.column("terminated"), False)))
    ids = pa.concat_arrays(
        [
            pc.cast(live.column("client_instance_id"), pa.string()).combine_chunks(),
            pc.cast(pushes.column("client_instance_id"), pa.string()).combine_chunks(),
        ]
    )
    seen, seen_ok = micros(
        pa.concat_arrays(
            [
                pc.cast(live.column("last_seen"), pa.int64()).combine_chunks(),
                pc.cast(pushes.column("received_at"), pa.int64()).combine_chunks(),
            ]
        )
    )
    interval = pa.concat_arrays(
        [
            pc.cast(column, pa.int64()).combine_chunks()
            for column in (live.column("push_interval_ms"), pushes.column("push_interval_ms"))
        ]
    )
    codes = np.asarray(pc.dictionary_encode(ids).indices.to_numpy(zero_copy_only=False))
    usable = np.flatnonzero(seen_ok & pc.is_valid(ids).to_numpy(zero_copy_only=False))
    order = usable[np.lexsort((seen[usable], codes[usable]))]
    deadline, _ = silence_deadlines(pa.array(seen[order], pa.int64()), interval.take(order))
    after = order[1:]
    # Only a push of this batch ends a silence (a carried row out of time order does not).
    is_push = after >= live.num_rows
    gap = (codes[after] == codes[order[:-1]]) & (seen[after] > deadline[:-1]) & is_push
    before, resumed = order[:-1][gap], after[gap]
    return pa.table(
        {
            "client_instance_id": ids.take(pa.array(before)),
            "last_seen": pa.array(seen[before], pa.int64()),
            "push_interval_ms": interval.take(pa.array(before)),
            "resumed_at": pa.array(seen[resumed], pa.int64()),
        },
        schema=SILENCES_ARROW,
    )


def lives(
    instances: pa.Array | pa.ChunkedArray, received_us: np.ndarray, gaps: pa.Table
) -> np.ndarray:
    """Each point's life: how many of its instance's silences ended at or before its push."""
    size = len(instances)
    if gaps.num_rows == 0:
        return np.zeros(size, dtype=np.int64)
    ids = pa.concat_arrays(
        [
            pc.cast(instances, pa.string()).combine_chunks()
            if isinstance(instances, pa.ChunkedArray)
            else pc.cast(instances, pa.string()),
            gaps.column("client_instance_id").combine_chunks(),
        ]
    )
    codes = np.asarray(pc.dictionary_encode(ids).indices.to_numpy(zero_copy_only=False))
    times = np.concatenate([received_us, filled(gaps.column("resumed_at"), 0).astype(np.int64)])
    is_gap = np.concatenate([np.zeros(size, np.int64), np.ones(gaps.num_rows, np.int64)])
    # By instance, then time; at equal times the silence first (its push is after it).
    order = np.lexsort((-is_gap, times, codes))
    count = np.cumsum(is_gap[order])
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = codes[order][1:] != codes[order][:-1]
    group = np.cumsum(starts) - 1
    before = (count - is_gap[order])[np.flatnonzero(starts)][group]
    life = np.empty(len(order), dtype=np.int64)
    life[order] = count - before
    return life[:size]


def alerts_by_life(
    points: pa.Table,
    order: SeriesOrder,
    state: pa.Table,
    rules: tuple[AlertRule, ...],
    inventory: pa.Table,
    gaps: pa.Table,
) -> tuple[pa.Table, pa.Table]:
    """The batch's alert events and the open episodes after it, one life at a time.

    ``order`` groups ``points`` by series in event-time order; ``state`` is
    the carried open episodes; ``inventory`` the instances' merged rows
    (their labels); ``gaps`` the batch's ``silences``. After each life, the
    episodes of the instances that then went silent end as of that silence.
    """
    if gaps.num_rows == 0:  # the usual batch: one life each, one pass
        episodes = track_episodes(rule_candidates(points, order, rules), state, rules)
        return alert_events(episodes, rules, inventory), open_episodes(episodes)
    received, _ = micros(points.column("received_at"))
    life = lives(points.column("client_instance_id"), received, gaps)[order.rows]
    # The gaps in instance and time order: the n-th of an instance follows its life n - 1.
    first_of = np.ones(gaps.num_rows, dtype=bool)
    if gaps.num_rows > 1:
        ids = gaps.column("client_instance_id")
        first_of[1:] = filled(pc.not_equal(ids[1:], ids[:-1]), True).astype(bool)
    group = np.cumsum(first_of) - 1
    gap_index = np.arange(gaps.num_rows) - np.flatnonzero(first_of)[group] + 1
    events = [ALERTS_ARROW.empty_table()]
    by_life = np.argsort(life, kind="stable")  # keeps the series grouping inside each life
    sorted_life = life[by_life]
    for k in range(max(int(life.max(initial=0)), int(gap_index.max(initial=0))) + 1):
        chosen = by_life[np.searchsorted(sorted_life, k) : np.searchsorted(sorted_life, k, "right")]
        mine = SeriesOrder(order.rows[chosen], order.codes[chosen])
        episodes = track_episodes(rule_candidates(points, mine, rules), state, rules)
        events.append(alert_events(episodes, rules, inventory))
        state = open_episodes(episodes)
        ending = gaps.filter(pa.array(gap_index == k + 1))
        if ending.num_rows and state.num_rows:
            ended, state = end_with_clients(state, _as_silent(inventory, ending), rules, LEAVING)
            events.append(ended)
    return pa.concat_tables(events), state


def _as_silent(inventory: pa.Table, ending: pa.Table) -> pa.Table:
    """The inventory rows of instances going silent, as of their push before the silence."""
    found = pc.index_in(ending.column("client_instance_id"), inventory.column("client_instance_id"))
    rows = take_rows(inventory, np.asarray(filled(found, 0), dtype=np.int64))
    replaced = {
        "client_instance_id": ending.column("client_instance_id"),
        "last_seen": pc.cast(ending.column("last_seen"), rows.schema.field("last_seen").type),
        "push_interval_ms": pc.cast(
            ending.column("push_interval_ms"), rows.schema.field("push_interval_ms").type
        ),
        "terminated": pa.array(np.zeros(ending.num_rows, dtype=bool)),
    }
    for name, column in replaced.items():
        index = rows.schema.get_field_index(name)
        rows = rows.set_column(index, rows.schema.field(index), column)
    return rows

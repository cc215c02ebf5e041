"""The client inventory KIP-714's workflows need, one row per client instance, and ``silent``.

Built from the landed pushes themselves (empty pushes included: they are how a
live client with nothing subscribed is told from a dead one) and from the
resource attributes librdkafka puts in its payloads (group id, member id,
transactional id, rack). The inventory is carried between batches; the
clients table is the inventory with the resource labels promoted and each
instance's ``silent`` flag, judged against the newest landed push (never the
wall clock: a pipeline that runs behind must not call live clients silent).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.arrays import (
    filled,
    flags,
    group_order,
    in_order,
    micros,
    runs,
    take_rows,
    timestamps,
)
from clientmetrics.pipeline.core.coverage import standard_lists
from clientmetrics.pipeline.core.schemas import (
    CLIENTS_ARROW,
    INVENTORY_ARROW,
    INVENTORY_LABELS,
    RESOURCE_LABELS,
    TIMESTAMP,
)

#: A client is silent after this many push intervals without a push.
SILENT_AFTER_INTERVALS = 3
#: The push interval assumed when a push did not say (KIP-714's default).
DEFAULT_PUSH_INTERVAL_MS = 300_000

_FLOOR = np.iinfo(np.int64).min
_CEILING = np.iinfo(np.int64).max


def _latest_resources(points: pa.Table) -> pa.Table:
    """Per instance, the resource attributes of its latest push that had points."""
    order = group_order(
        points.column("client_instance_id"),
        ("t", pc.cast(points.column("received_at"), pa.int64())),
    )
    grouped = in_order(points, order, ["client_instance_id"])
    _, last = runs(grouped.column("client_instance_id"))
    rows = grouped.column("_row").take(pa.array(last))
    return points.select(["client_instance_id", "received_at", "resource_attributes"]).take(rows)


def client_views(pushes: pa.Table, points: pa.Table) -> pa.Table:
    """This batch's view of each instance, in the inventory's shape (one row each).

    ``last_push`` is the last push that carried metrics; ``last_seen`` counts
    empty pushes too; ``terminated`` is whether the latest push was terminating.
    Without a ``payload`` column, whether a push carried metrics is unknown
    and ``last_push`` is null.
    """
    if pushes.num_rows == 0:
        return INVENTORY_ARROW.empty_table()
    received = pc.cast(pushes.column("received_at"), pa.int64())
    pushes = pushes.take(group_order(pushes.column("client_instance_id"), ("t", received)))
    first, last = runs(pushes.column("client_instance_id"))
    latest = take_rows(pushes, last)
    received_at, received_ok = micros(pushes.column("received_at"))
    if "payload" in pushes.column_names:
        with_metrics = filled(pc.greater(pc.binary_length(pushes.column("payload")), 0), False)
    else:
        with_metrics = np.zeros(pushes.num_rows, dtype=bool)
    floor = np.iinfo(np.int64).min
    pushed = np.maximum.reduceat(
        np.where(with_metrics.astype(bool) & received_ok, received_at, floor), first
    )
    resources = _latest_resources(points)
    found = pc.index_in(latest.column("client_instance_id"), resources.column("client_instance_id"))
    columns = {
        "client_instance_id": latest.column("client_instance_id"),
        **{name: latest.column(name) for name in INVENTORY_LABELS},
        "resource_attributes": resources.column("resource_attributes").take(found),
        "resource_seen": resources.column("received_at").take(found),
        "first_seen": pushes.column("received_at").take(pa.array(first)),
        "last_seen": latest.column("received_at"),
        "last_push": pa.array(pushed, pa.int64(), mask=pushed == floor).cast(TIMESTAMP),
        "pushes": pa.array(last - first + 1, pa.int64()),
        "terminated": latest.column("terminating"),
        "standard_metrics": _standard_sent(points, latest.column("client_instance_id")),
    }
    return pa.table([columns[name] for name in INVENTORY_ARROW.names], schema=INVENTORY_ARROW)


def _standard_sent(points: pa.Table, ids: pa.Array | pa.ChunkedArray) -> pa.ListArray:
    """Per instance of ``ids``, the standard metrics among its points."""
    if "metric_name" not in points.column_names or points.num_rows == 0:
        return standard_lists(np.zeros(0, np.int64), pa.array([], pa.string()), len(ids))
    found = pc.fill_null(pc.index_in(points.column("client_instance_id"), ids), -1)
    group = np.asarray(found.to_numpy(zero_copy_only=False), dtype=np.int64)
    return standard_lists(group, points.column("metric_name"), len(ids))


def merge_inventory(carried: pa.Table, view: pa.Table) -> pa.Table:
    """Fold a batch's view of each instance into the carried inventory (both ``INVENTORY_ARROW``).

    Labels and ``terminated`` come from the row seen last; resource attributes
    from the row whose resources were seen last; first and last seen, last
    push and the push count combine.
    """
    if carried.num_rows == 0:
        return view.cast(INVENTORY_ARROW)
    both = pa.concat_tables([carried.cast(INVENTORY_ARROW), view.cast(INVENTORY_ARROW)])
    order = group_order(
        both.column("client_instance_id"),
        ("t", pc.cast(both.column("last_seen"), pa.int64())),
    )
    both = both.take(order)
    first, last = runs(both.column("client_instance_id"))
    latest = take_rows(both, last)
    resource_seen, resource_ok = micros(both.column("resource_seen"))
    newest_resource = np.maximum.reduceat(np.where(resource_ok, resource_seen, _FLOOR), first)
    # The row of each instance whose resources are the newest (the last such row).
    position = np.arange(both.num_rows)
    is_newest = resource_ok & (resource_seen == np.repeat(newest_resource, last - first + 1))
    chosen = np.maximum.reduceat(np.where(is_newest, position, -1), first)
    has_resource = chosen >= 0
    resources = both.column("resource_attributes").take(
        pa.array(np.where(has_resource, chosen, 0), pa.int64(), mask=~has_resource)
    )

    def reduce(name: str, op: np.ufunc, fill: int) -> pa.Array:
        moments, ok = micros(both.column(name))
        reduced = op.reduceat(np.where(ok, moments, fill), first)
        return timestamps(reduced, reduced == fill)

    columns = {
        "client_instance_id": latest.column("client_instance_id"),
        **{name: latest.column(name) for name in INVENTORY_LABELS},
        "resource_attributes": resources,
        "resource_seen": timestamps(newest_resource, newest_resource == _FLOOR),
        "first_seen": reduce("first_seen", np.minimum, _CEILING),
        "last_seen": reduce("last_seen", np.maximum, _FLOOR),
        "last_push": reduce("last_push", np.maximum, _FLOOR),
        "pushes": pa.array(np.add.reduceat(filled(both.column("pushes"), 0), first), pa.int64()),
        "terminated": latest.column("terminated"),
        "standard_metrics": _merged_lists(both.column("standard_metrics"), first),
    }
    return pa.table([columns[name] for name in INVENTORY_ARROW.names], schema=INVENTORY_ARROW)


def _merged_lists(lists: pa.Array | pa.ChunkedArray, first: np.ndarray) -> pa.ListArray:
    """The union of each run's lists (runs start at ``first``)."""
    array = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    parents = np.asarray(pc.list_parent_indices(array).to_numpy(), dtype=np.int64)
    group = np.searchsorted(first, parents, side="right") - 1
    return standard_lists(group, pc.list_flatten(array), len(first))


def silent(
    last_seen: pa.Array | pa.ChunkedArray,
    push_interval_ms: pa.Array | pa.ChunkedArray,
    terminated: pa.Array | pa.ChunkedArray,
    as_of_us: int,
) -> pa.Array:
    """Whether each client went silent: no push for 3 × its push interval before ``as_of_us``.

    ``as_of_us`` is the newest landed push (µs since the epoch): the clock of
    the data, not of whoever looks. A client that said goodbye with a
    terminating push is not silent; one never seen is.
    """
    seen, seen_ok = micros(last_seen)
    interval = filled(pc.cast(push_interval_ms, pa.int64()), DEFAULT_PUSH_INTERVAL_MS)
    overdue = ~seen_ok | ((as_of_us - seen) > SILENT_AFTER_INTERVALS * interval * 1000)
    return pa.array(overdue & ~flags(terminated), pa.bool_())


def clients_table(inventory: pa.Table, as_of_us: int | None) -> pa.Table:
    """The clients table's rows (``CLIENTS_ARROW``): resource labels promoted, ``silent`` set.

    ``as_of_us`` is the newest push the pipeline has seen (None: none yet,
    and nobody is silent).
    """
    inventory = inventory.cast(INVENTORY_ARROW)
    resources = inventory.column("resource_attributes")
    if as_of_us is None:
        quiet = pa.array(np.zeros(inventory.num_rows, dtype=bool))
    else:
        quiet = silent(
            inventory.column("last_seen"),
            inventory.column("push_interval_ms"),
            inventory.column("terminated"),
            as_of_us,
        )
    columns = {name: inventory.column(name) for name in INVENTORY_ARROW.names}
    for name in RESOURCE_LABELS:
        columns[name] = pc.list_element(pc.map_lookup(resources, name, "all"), 0)
    columns["silent"] = quiet
    return pa.table(
        [pc.cast(columns[name], CLIENTS_ARROW.field(name).type) for name in CLIENTS_ARROW.names],
        schema=CLIENTS_ARROW,
    )


def retire(inventory: pa.Table, horizon_us: int | None) -> tuple[pa.Table, pa.Table]:
    """The inventory split into instances still kept and those retired.

    An instance retires when it has sent nothing since ``horizon_us`` (the
    event-time high-water mark less the retention); None retires nobody.
    """
    if horizon_us is None or inventory.num_rows == 0:
        return inventory, INVENTORY_ARROW.empty_table()
    seen, seen_ok = micros(inventory.column("last_seen"))
    gone = seen_ok & (seen < horizon_us)
    return inventory.filter(pa.array(~gone)), inventory.filter(pa.array(gone))


def client_labels(inventory: pa.Table) -> pa.Array:
    """Per instance, its labels as one map: the push labels, then its resource attributes.

    What an alert carries about its client (the collection KIP-714's proactive
    monitoring workflow describes). Resource attributes do not override the
    push labels or the instance id.
    """
    own = {"client_instance_id", *INVENTORY_LABELS}
    rows = []
    for row in inventory.select(
        ["client_instance_id", *INVENTORY_LABELS, "resource_attributes"]
    ).to_pylist():
        labels = [("client_instance_id", row["client_instance_id"])]
        labels += [
            (name, None if row[name] is None else str(row[name])) for name in INVENTORY_LABELS
        ]
        labels += [(k, v) for k, v in row["resource_attributes"] or [] if k not in own]
        rows.append(labels)
    return pa.array(rows, pa.map_(pa.string(), pa.string()))

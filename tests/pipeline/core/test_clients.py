"""The inventory, ``silent`` judged against the newest landed push, and retention: by hand."""

from __future__ import annotations

import pyarrow as pa

from clientmetrics.pipeline.core.batch import PassPlan, process_group
from clientmetrics.pipeline.core.clients import (
    client_views,
    clients_table,
    clock_changes_at,
    merge_inventory,
)
from clientmetrics.pipeline.core.decode import decode_pushes
from clientmetrics.pipeline.core.rules import parse_rules
from clientmetrics.pipeline.core.schemas import (
    INVENTORY_ARROW,
    LANDING_ARROW,
    PASS_INPUT_ARROW,
)
from tests.pipeline.core.tables import T0, at, at_us, by_column, table
from tests.synthetic import Push, landing_table, producer_payload

DAY_US = 86_400_000_000
RULES = parse_rules({"rule": [{"name": "r", "metric": "m", "op": ">", "threshold": 1}]}).rules


def _pushes(*pushes: Push) -> pa.Table:
    return landing_table(list(pushes)).cast(LANDING_ARROW)


def _push(instance: str, seconds: float, payload: bytes, **labels: object) -> Push:
    fields = {"push_interval_ms": 10_000, **labels}
    return Push(at_us(seconds), instance, payload, **fields)  # type: ignore[arg-type]


def _view(pushes: pa.Table) -> pa.Table:
    return client_views(pushes, _with_series(decode_pushes(pushes)))


def _with_series(points: pa.Table) -> pa.Table:
    return points.append_column("series", pa.nulls(points.num_rows, pa.string()))


def test_inventory_merges_batches_and_marks_silent_and_terminated() -> None:
    payload = producer_payload(at_us(0) * 1000, 1)
    first = _pushes(_push("a", 0, payload, client_source_port=1), _push("b", 0, payload))
    second = _pushes(
        _push("a", 20, b"", client_source_port=2), _push("b", 5, payload, terminating=True)
    )
    inventory = merge_inventory(INVENTORY_ARROW.empty_table(), _view(first))
    inventory = merge_inventory(inventory, _view(second))
    rows = clients_table(inventory, at_us(60))
    columns = (
        "client_instance_id",
        "client_source_port",
        "client_rack",
        "first_seen",
        "last_seen",
        "last_push",
        "pushes",
        "terminated",
        "silent",
    )
    assert sorted(by_column(rows, *columns)) == [
        # 40 s after its last push, "a" (every 10 s) has missed three intervals: silent.
        ("a", 2, "rack-a", T0, at(20), T0, 2, False, True),
        # "b" said goodbye: never silent.
        ("b", 40000, "rack-a", T0, at(5), at(5), 2, True, False),
    ]
    # Judged at 45 s (the newest push landed), "a" is 25 s late: within 3 intervals.
    assert by_column(clients_table(inventory, at_us(45)), "silent") == [(False,), (False,)]
    assert by_column(clients_table(inventory, None), "silent") == [(False,), (False,)]


def _inventory_row(instance: str, last_seen_s: float) -> dict[str, object]:
    return {
        "carried": "client",
        "client_instance_id": instance,
        "push_interval_ms": 5000,
        "first_seen": at(0),
        "last_seen": at(last_seen_s),
        "pushes": 3,
        "terminated": False,
    }


def test_state_of_instances_silent_beyond_the_retention_is_dropped() -> None:
    eight_days = 8 * 86_400
    rows = table(
        PASS_INPUT_ARROW,
        [
            # "old" last pushed 8 days before the horizon's clock; "live" 1 s before.
            _inventory_row("old", 0),
            {"carried": "series", "client_instance_id": "old", "series": "old|m|",
             "last_time": at(0), "last_cumulative": 5.0},
            {"carried": "window", "client_instance_id": "old", "series": "old|m|",
             "metric_name": "m", "window_start": at(0), "window_end": at(60), "count": 1},
            {"carried": "alert", "client_instance_id": "old", "rule": "r", "series": "old|m|",
             "started_at": at(0)},
            {"carried": "alert", "client_instance_id": "old", "rule": "r", "series": "old|n|",
             "metric_name": "n", "started_at": at(0), "fired_at": at(2)},
            _inventory_row("live", eight_days - 1),
            {"carried": "series", "client_instance_id": "live", "series": "live|m|",
             "last_time": at(eight_days - 1), "last_cumulative": 7.0},
        ],
    )  # fmt: skip
    plan = PassPlan(
        staging="",
        window_seconds=60,
        rules=RULES,
        as_of_us=at_us(eight_days),
        retire_before_us=at_us(eight_days) - 7 * DAY_US,
    )
    sides = process_group(rows, plan).sides
    assert sides["series"].column("series").to_pylist() == ["live|m|"]
    assert sides["windows"].num_rows == 0
    assert sides["alert_state"].num_rows == 0
    assert sides["inventory"].column("client_instance_id").to_pylist() == ["live"]
    assert sides["clients"].column("client_instance_id").to_pylist() == ["live"]
    assert by_column(sides["retired_clients"], "client_instance_id", "last_seen", "pushes") == [
        ("old", at(0), 3)
    ]
    # Its alert that fired resolves as expired (silent 3 x 5 s after its last push); the
    # one that had not fired goes without an event.
    assert by_column(sides["alerts"], "metric_name", "status", "resolution", "resolved_at") == [
        ("n", "resolved", "expired", at(15))
    ]
    # Without a retention horizon (the first batch), nothing retires.
    kept = process_group(rows, PassPlan(staging="", window_seconds=60, rules=RULES)).sides
    assert (kept["inventory"].num_rows, kept["retired_clients"].num_rows) == (2, 0)
    assert (kept["series"].num_rows, kept["windows"].num_rows) == (2, 1)
    assert kept["alert_state"].column("client_instance_id").to_pylist() == ["old", "old"]


def test_the_clock_that_would_judge_clients_otherwise() -> None:
    inventory = table(
        INVENTORY_ARROW,
        [
            # every 5 s: silent once more than 15 s pass without a push
            {"client_instance_id": "a", "last_seen": at(30), "push_interval_ms": 5000},
            {"client_instance_id": "b", "last_seen": at(44), "push_interval_ms": 5000},
            {"client_instance_id": "bye", "last_seen": at(1), "terminated": True},
        ],
        terminated=False,
    )
    # Judged at 40 s nobody is silent; "a" is from just after 45 s, "b" after 59 s.
    assert clock_changes_at(inventory, at_us(40)) == at_us(45) + 1
    silent_at = [by_column(clients_table(inventory, at_us(s)), "silent") for s in (40, 45)]
    assert silent_at[0] == silent_at[1] == [(False,), (False,), (False,)]
    assert by_column(clients_table(inventory, at_us(45) + 1), "silent")[0] == (True,)
    assert clock_changes_at(inventory, at_us(46)) == at_us(59) + 1
    assert clock_changes_at(inventory, at_us(60)) is None  # all silent or gone for good
    # Without a clock nobody is silent: the first deadline changes that.
    assert clock_changes_at(inventory, None) == at_us(45) + 1
    unseen = table(INVENTORY_ARROW, [{"client_instance_id": "u"}], terminated=False)
    assert clock_changes_at(unseen, None) is not None  # any clock makes it silent
    assert clock_changes_at(INVENTORY_ARROW.empty_table(), at_us(0)) is None

"""Alert episodes and events across batches: by hand."""

from __future__ import annotations

import hashlib

import pyarrow as pa

from clientmetrics.pipeline.core.alerts import (
    alert_events,
    open_episodes,
    rule_candidates,
    rule_matches,
    track_episodes,
)
from clientmetrics.pipeline.core.rates import normalise
from clientmetrics.pipeline.core.rules import AlertRule, parse_rules
from clientmetrics.pipeline.core.schemas import (
    ALERT_STATE_ARROW,
    INVENTORY_ARROW,
    SERIES_STATE_ARROW,
)
from clientmetrics.pipeline.core.series import running_values
from tests.pipeline.core.tables import at, at_us, by_column, decoded, table

METRIC = "org.apache.kafka.producer.node.request.latency.avg"
INVENTORY = table(
    INVENTORY_ARROW,
    [
        {
            "client_instance_id": "i-1",
            "client_id": "app",
            "client_source_address": "10.1.1.1",
            "client_source_port": 4242,
            # A resource attribute cannot override a label the gateway saw.
            "resource_attributes": {"group_id": "g", "client_id": "spoofed"},
        }
    ],
)


def _rules(condition: str) -> tuple[AlertRule, ...]:
    return parse_rules({"rule": [{"name": "slow", "metric": METRIC, "condition": condition}]}).rules


def _step(
    rules: tuple[AlertRule, ...], values: list[tuple[float, float | None]], state: pa.Table
) -> tuple[pa.Table, pa.Table]:
    rows = [
        {"metric_name": METRIC, "kind": "gauge", "event_time": at(t), "value": v} for t, v in values
    ]
    rows.append({"metric_name": "other", "kind": "gauge", "event_time": at(0), "value": 1e9})
    running, order = running_values(decoded(rows))
    points = normalise(running, SERIES_STATE_ARROW.empty_table())
    episodes = track_episodes(rule_candidates(points, order, rules), state, rules)
    return alert_events(episodes, rules, INVENTORY), open_episodes(episodes)


def test_kip_rule_fires_only_after_more_than_180_seconds_then_resolves() -> None:
    rules = _rules("exceeded 5000 ms for more than 180 seconds")
    # 0..180 s above the threshold: exactly 180 s is not "more than" 180 s.
    first = [(0, 6000.0), (60, 7000.0), (120, 6500.0), (180, 6100.0), (190, None)]
    events, state = _step(rules, first, ALERT_STATE_ARROW.empty_table())
    assert events.num_rows == 0
    events, state = _step(rules, [(240, 9000.0), (300, 100.0), (360, 8000.0)], state)
    assert by_column(events, "status", "started_at", "fired_at", "resolved_at", "peak") == [
        ("firing", at(0), at(240), None, 9000.0),
        ("resolved", at(0), at(240), at(300), 9000.0),
    ]
    labels = dict(events.column("labels")[0].as_py())
    assert (labels["client_id"], labels["client_source_address"], labels["group_id"]) == (
        "app",
        "10.1.1.1",
        "g",
    )
    assert labels["client_source_port"] == "4242"
    # One id for both events of the episode: sha256 of rule, series and start, as SQL spells it.
    series = f"i-1|{METRIC}|"
    expected = hashlib.sha256(f"slow|{series}|2026-11-21 12:00:00".encode()).hexdigest()[:32]
    assert set(events.column("alert_id").to_pylist()) == {expected}
    # The episode started at 360 s is open and has not fired.
    assert by_column(state, "started_at", "last_true_at", "fired_at") == [(at(360), at(360), None)]


def test_an_open_fired_episode_resolves_in_a_later_batch() -> None:
    rules = _rules("below 10 for at least 60 seconds")
    events, state = _step(rules, [(0, 5.0), (60, 1.0)], ALERT_STATE_ARROW.empty_table())
    assert by_column(events, "status", "fired_at", "peak") == [("firing", at(60), 1.0)]
    events, state = _step(rules, [(120, 50.0)], state)
    assert by_column(events, "status", "started_at", "resolved_at", "peak") == [
        ("resolved", at(0), at(120), 1.0)
    ]
    assert state.num_rows == 0


def test_a_firing_event_has_the_same_peak_however_the_points_are_batched() -> None:
    """Its peak is the extreme up to its firing point, not up to the end of its batch."""
    rules = _rules("exceeded 5000 ms for at least 60 seconds")
    points = [(0, 6000.0), (60, 7000.0), (120, 9000.0), (180, 100.0)]
    expected = [("firing", at(60), 7000.0), ("resolved", at(60), 9000.0)]
    events, _ = _step(rules, points, ALERT_STATE_ARROW.empty_table())
    assert by_column(events, "status", "fired_at", "peak") == expected
    split = ALERT_STATE_ARROW.empty_table()
    seen = []
    for batch in ([points[0]], points[1:3], points[3:]):
        events, split = _step(rules, batch, split)
        seen += by_column(events, "status", "fired_at", "peak")
    assert seen == expected


def test_rules_name_metrics_exactly_or_by_prefix() -> None:
    rules = parse_rules(
        {
            "rule": [
                {"name": "exact", "metric": METRIC, "condition": "exceeded 1 ms for 1 second"},
                {"name": "p", "metric": "org.apache.kafka.consumer.", "op": "<", "threshold": 1},
            ]
        }
    ).rules
    names = pa.array([METRIC, f"{METRIC}.max", "org.apache.kafka.consumer.x", "org.apache.kafka.c"])
    assert rule_matches(names, rules[0]).tolist() == [True, False, False, False]
    assert rule_matches(names, rules[1]).tolist() == [False, False, True, False]


def test_alerts_of_a_client_that_terminated_or_expired_resolve_with_the_reason() -> None:
    from clientmetrics.dashboard.alerts import episodes, open_counts
    from clientmetrics.pipeline.core.alerts import end_with_clients

    rules = _rules("exceeded 5000 ms for more than 10 seconds")
    fired = {"rule": "slow", "metric_name": METRIC, "started_at": at(0), "fired_at": at(20)}
    state = table(
        ALERT_STATE_ARROW,
        [
            {**fired, "series": "gone|m|", "client_instance_id": "gone"},
            {**fired, "series": "quiet|m|", "client_instance_id": "quiet"},
            {**fired, "series": "live|m|", "client_instance_id": "live"},
            # not fired yet: dropped, no event
            {**fired, "series": "gone|n|", "client_instance_id": "gone", "fired_at": None},
        ],
    )
    inventory = table(
        INVENTORY_ARROW,
        [
            {"client_instance_id": "gone", "last_seen": at(30), "terminated": True},
            # interval 5 s: silent once 15 s pass without a push
            {"client_instance_id": "quiet", "last_seen": at(30), "push_interval_ms": 5000},
            {"client_instance_id": "live", "last_seen": at(44), "push_interval_ms": 5000},
        ],
        terminated=False,
    )
    events, still_open = end_with_clients(state, inventory, rules, as_of_us=at_us(46))
    assert by_column(events, "client_instance_id", "status", "resolution", "resolved_at") == [
        ("gone", "resolved", "terminated", at(30)),  # at its terminating push
        ("quiet", "resolved", "expired", at(45)),  # when it went silent: 30 s + 3 × 5 s
    ]
    assert by_column(still_open, "client_instance_id") == [("live",)]

    # The dashboard folds the resolutions into the episodes: the open count drops.
    firing = alert_events(
        state.append_column("episode", pa.array([0] * 4, pa.int64()))
        .append_column("resolved_at", pa.nulls(4, pa.timestamp("us", tz="UTC")))
        .append_column("newly_fired", pa.array([True, True, True, False]))
        .append_column("fired_high", state.column("high"))
        .append_column("fired_low", state.column("low")),
        rules,
        inventory,
    )
    assert open_counts(episodes(firing)) == {"gone": 1, "quiet": 1, "live": 1}
    assert open_counts(episodes(pa.concat_tables([firing, events]))) == {"live": 1}


def test_non_finite_values_are_no_measurement_never_a_crossing_nor_a_peak() -> None:
    """NaN (Kafka's average of an empty window) and ±Inf neither fire, resolve nor peak."""
    rules = _rules("exceeded 5000 ms for more than 5 seconds")
    nan, inf = float("nan"), float("inf")
    # A Java client's bootstrap connection: nothing but NaN, never an episode.
    events, state = _step(
        rules, [(t, nan) for t in range(0, 60, 5)], ALERT_STATE_ARROW.empty_table()
    )
    assert (events.num_rows, state.num_rows) == (0, 0)
    events, state = _step(rules, [(0, inf), (10, -inf), (20, inf)], state)
    assert (events.num_rows, state.num_rows) == (0, 0)
    # Non-finite points inside an episode neither end it nor count as its peak:
    # 6000 at 0 s, 7000 at 6 s: more than 5 s above, so it fires at 6 s with peak 7000;
    # it resolves at 20 s (100), not at the NaN of 3 s or the -Inf of 10 s.
    points = [(0, 6000.0), (3, nan), (6, 7000.0), (8, inf), (10, -inf), (12, nan), (20, 100.0)]
    expected = [
        ("firing", at(0), at(6), None, 7000.0),
        ("resolved", at(0), at(6), at(20), 7000.0),
    ]
    events, state = _step(rules, points, ALERT_STATE_ARROW.empty_table())
    assert by_column(events, "status", "started_at", "fired_at", "resolved_at", "peak") == expected
    assert state.num_rows == 0
    # The same points one a batch: the same events.
    seen, state = [], ALERT_STATE_ARROW.empty_table()
    for point in points:
        events, state = _step(rules, [point], state)
        seen += by_column(events, "status", "started_at", "fired_at", "resolved_at", "peak")
    assert seen == expected
    # A "below" rule: NaN is not below anything either.
    low = _rules("below 10 for at least 0 seconds")
    events, _ = _step(low, [(0, nan), (1, -inf)], ALERT_STATE_ARROW.empty_table())
    assert events.num_rows == 0

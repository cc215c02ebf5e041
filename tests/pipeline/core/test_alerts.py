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
from tests.pipeline.core.tables import at, by_column, decoded, table

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

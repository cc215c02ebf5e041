"""The findings catalogue in the one rule engine: each finding by hand-built points."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pyarrow as pa
import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.core.alerts import (
    event_lines,
)
from clientmetrics.pipeline.core.findings import catalogue, finding_of
from clientmetrics.pipeline.core.incidents import alertmanager_alert, incident_labels
from clientmetrics.pipeline.core.rules import AlertRule, parse_rules
from clientmetrics.pipeline.core.schemas import (
    INVENTORY_ARROW,
)
from tests.pipeline.core.engine import EnginePass, engine_pass
from tests.pipeline.core.tables import at, by_column, decoded, table
from tests.pipeline.core.test_baselines import BASELINE_CASES

P = "org.apache.kafka."
#: Per finding: a metric it reads, a value it fires on, a healthy value (worked out by hand
#: from the shipped conditions), the per-broker attributes of the point.
CASES: dict[str, tuple[str, float, float, dict[str, str]]] = {
    "slow-processing": (f"{P}consumer.poll.idle.ratio.avg", 0.05, 0.9, {}),
    "throttled-producer": (f"{P}producer.produce.throttle.time.avg", 450.0, 0.0, {}),
    "send-buffer-pressure": (f"{P}producer.record.queue.time.avg", 3000.0, 2.5, {}),
    "reconnect-storm": (f"{P}consumer.connection.creation.rate", 4.0, 0.02, {}),
    "slow-commits": (f"{P}consumer.coordinator.commit.latency.avg", 2500.0, 3.0, {}),
    "slow-broker-requests": (
        f"{P}producer.node.request.latency.avg",
        4000.0,
        2.5,
        {"node.id": "3"},
    ),
    # The Java client's non-standard metrics.
    "one-record-per-request": (f"{P}producer.records.per.request.avg", 1.0, 20.0, {}),
    "producer-retries": (f"{P}producer.record.retry.rate", 5.0, 0.0, {}),
    "producer-errors": (f"{P}producer.record.error.rate", 0.02, 0.0, {}),
    "failed-authentication": (f"{P}consumer.failed.authentication.rate", 0.5, 0.0, {}),
}
#: Findings on a sum's rate: the metric (a counter of ms) each reads.
RATE_CASES = {"rebalance-churn": f"{P}consumer.coordinator.rebalance.latency.total"}
INVENTORY = table(
    INVENTORY_ARROW,
    [
        {
            "client_instance_id": "i-1",
            "client_id": "billing",
            "client_software_name": "apache-kafka-java",
            "client_software_version": "4.4.0",
            "client_source_address": "10.1.1.1",
            "client_source_port": 4242,
            "principal": "User:billing",
            "node_id": 1,
            "resource_attributes": {
                "group_id": "billing-group",
                "group_instance_id": "billing-0",
                "member_id": "m-7",
                "transactional_id": "tx-1",
            },
        }
    ],
)


def _all_findings() -> tuple[AlertRule, ...]:
    return parse_rules({"findings": True}).rules


def _run(rules: tuple[AlertRule, ...], name: str, values: list[float]) -> pa.Table:
    """The events of one series pushed every 60 s with ``values``, in one batch."""
    metric, _, _, attributes = CASES[name]
    rows: list[dict[str, Any]] = [
        {
            "metric_name": metric,
            "kind": "gauge",
            "event_time": at(60 * i),
            "value": v,
            "attributes": attributes,
        }
        for i, v in enumerate(values)
    ]
    return engine_pass(decoded(rows), rules, INVENTORY)


def test_the_catalogue_has_the_findings_the_tests_cover() -> None:
    assert {finding.name for finding in catalogue()} == set(CASES) | set(RATE_CASES) | set(
        BASELINE_CASES
    )
    for finding in catalogue():
        assert finding.meaning
        assert finding.suggestion
        assert finding.summary


@pytest.mark.parametrize("name", sorted(CASES))
def test_fires_on_the_third_bad_push_and_resolves(name: str) -> None:
    _, bad, good, _ = CASES[name]
    events = _run(_all_findings(), name, [good, bad, bad, bad, bad, good, good])
    # Bad from 60 s: held for 120 s at 180 s (the third bad push), cleared at 300 s.
    assert by_column(events, "status", "started_at", "fired_at", "resolved_at") == [
        ("firing", at(60), at(180), None),
        ("resolved", at(60), at(180), at(300)),
    ]
    assert {finding_of(rule).name for rule in events.column("rule").to_pylist()} == {name}  # type: ignore[union-attr]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_blip_never_fires(name: str) -> None:
    _, bad, good, _ = CASES[name]
    events = _run(_all_findings(), name, [good, bad, good, bad, bad, good, bad, good])
    assert events.num_rows == 0


def _run_counter(totals: list[tuple[float, float]]) -> pa.Table:
    """The events of a cumulative rebalance-time counter: (start second, total ms) every 60 s."""
    rows: list[dict[str, Any]] = [
        {
            "metric_name": RATE_CASES["rebalance-churn"],
            "kind": "sum",
            "temporality": "cumulative",
            "monotonic": True,
            "start_time": at(start),
            "event_time": at(60 * (i + 1)),
            "value": total,
        }
        for i, (start, total) in enumerate(totals)
    ]
    return engine_pass(decoded(rows), _all_findings(), INVENTORY)


def test_rebalance_churn_judges_the_rebalance_time_per_second() -> None:
    # Pushes at 60..480 s of a counter started at 0: one healthy 1 s rebalance (16.7 ms/s),
    # then 12 s of rebalancing per 60 s push (200 ms/s > 100) from the push at 180 s,
    # then none from 420 s. Held from 180 s, 120 s later (300 s) it fires; 420 s resolves.
    totals = [1000.0, 1000.0, 13000.0, 25000.0, 37000.0, 49000.0, 49000.0, 49000.0]
    events = _run_counter([(0, total) for total in totals])
    assert by_column(events, "status", "started_at", "fired_at", "resolved_at") == [
        ("firing", at(180), at(300), None),
        ("resolved", at(180), at(300), at(420)),
    ]
    assert events.column("rule").to_pylist() == ["rebalance-churn"] * 2
    assert events.column("peak").to_pylist()[0] == pytest.approx(200.0)


def test_a_restart_or_a_large_lifetime_total_is_no_rebalance_churn() -> None:
    # A long-lived client's first push carries a large total (its lifetime's: 3 h at
    # 30 ms/s), then the client restarts at 250 s (a new start time, the counter back
    # near 0): neither the total nor the reset reads as churn.
    lifetime = 30.0 * 3 * 3600
    totals = [(-3 * 3600 + 60, lifetime + 60 * i) for i in range(4)]
    totals += [(250, 500.0), (250, 900.0), (250, 1300.0), (250, 1700.0)]
    assert _run_counter(totals).num_rows == 0


def test_nan_is_no_slow_processing() -> None:
    # Kafka's average of an empty window is NaN: no sample, not "never idle".
    events = _run(_all_findings(), "slow-processing", [float("nan")] * 6)
    assert events.num_rows == 0


def test_findings_are_off_unless_enabled_and_can_be_disabled_or_tuned() -> None:
    assert parse_rules({}).rules == ()
    assert parse_rules({"findings": False, "finding": {"slow-commits": {}}}).rules == ()
    rules = parse_rules(
        {
            "findings": True,
            "finding": {
                "reconnect-storm": {"enabled": False},
                "slow-processing": {"condition": "below 0.5 for at least 300 seconds"},
            },
        }
    ).rules
    names = {rule.name for rule in rules}
    assert not any(name.startswith("reconnect-storm") for name in names)
    assert {"slow-broker-requests/producer", "slow-broker-requests/consumer"} <= names
    tuned = next(rule for rule in rules if rule.name == "slow-processing")
    assert (tuned.op, tuned.threshold, tuned.duration_seconds) == ("<", 0.5, 300.0)
    # Tuned: 0.3 now counts as slow, and four bad pushes (180 s) are not yet 300 s.
    assert _run(rules, "slow-processing", [0.3, 0.3, 0.3, 0.3]).num_rows == 0
    assert _run(rules, "slow-processing", [0.3] * 6).column("status").to_pylist() == ["firing"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"findings": True, "finding": {"slow-procesing": {}}}, "no finding named"),
        ({"findings": True, "finding": {"slow-commits": {"threshold": 5}}}, "may set only"),
        ({"findings": "yes"}, "true or false"),
        ({"findings": True, "finding": {"slow-commits": {"condition": "soon"}}}, "slow-commits"),
        (
            {
                "findings": True,
                "rule": [{"name": "slow-commits", "metric": "x", "condition": "above 1 for 1 s"}],
            },
            "unique",
        ),
    ],
)
def test_a_wrong_findings_section_is_a_clear_error(document: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_rules(document)


def test_an_incident_carries_the_kip_labels_and_the_suggestion() -> None:
    events = _run(_all_findings(), "slow-broker-requests", [4000.0, 4000.0, 4000.0])
    (line,) = event_lines(events)

    event = json.loads(line)
    labels = incident_labels(event)
    assert labels == {
        "alertname": "slow-broker-requests",
        "finding": "slow-broker-requests",
        "rule": "slow-broker-requests/producer",
        "severity": "warning",
        "metric_name": f"{P}producer.node.request.latency.avg",
        "client_instance_id": "i-1",
        "client_id": "billing",
        "client_source_address": "10.1.1.1",
        "client_source_port": "4242",
        "principal": "User:billing",
        "client_software_name": "apache-kafka-java",
        "client_software_version": "4.4.0",
        "group_id": "billing-group",
        "group_instance_id": "billing-0",
        "group_member_id": "m-7",
        "transactional_id": "tx-1",
        # The broker the finding is about (the point's node.id), and the one pushed to.
        "node_id": "3",
        "push_node_id": "1",
    }
    alert = alertmanager_alert(event)
    assert alert["startsAt"] == "2026-11-21T12:02:00Z"
    assert alert["endsAt"] == "2026-11-22T12:02:00Z"  # held until its resolved event
    assert "broker" in alert["annotations"]["suggestion"]
    assert alert["annotations"]["peak"] == "4000.0"


def test_a_resolved_incident_ends_at_its_resolution() -> None:
    events = _run(_all_findings(), "throttled-producer", [450.0, 450.0, 450.0, 0.0])
    resolved = [line for line in event_lines(events) if '"resolved"' in line]

    alert = alertmanager_alert(json.loads(resolved[0]))
    assert (alert["startsAt"], alert["endsAt"]) == ("2026-11-21T12:02:00Z", "2026-11-21T12:03:00Z")
    assert alert["labels"]["alertname"] == "throttled-producer"


def test_open_state_carries_a_finding_across_batches() -> None:
    rules = _all_findings()
    metric, bad, _, _ = CASES["slow-commits"]
    engine = EnginePass(rules, INVENTORY)
    fired: list[datetime] = []
    for second in (0, 60, 120):  # one push per batch
        rows = [{"metric_name": metric, "kind": "gauge", "event_time": at(second), "value": bad}]
        fired += engine.batch(decoded(rows)).column("fired_at").to_pylist()
    assert fired == [at(120)]

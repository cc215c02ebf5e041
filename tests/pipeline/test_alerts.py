"""Alert episodes: fire after the whole duration, resolve when the condition stops holding."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from clientmetrics.pipeline.alerts import (
    evaluate_rules,
    points_named_by,
    rules_frame,
    select_alert_events,
    select_open_episodes,
    track_alert_episodes,
)
from clientmetrics.pipeline.job import INVENTORY_STATE
from clientmetrics.pipeline.rules import parse_rules
from clientmetrics.pipeline.schemas import ALERT_STATE
from tests.pipeline.frames import at, naive, points_frame

METRIC = "org.apache.kafka.producer.node.request.latency.avg"


def _rules(spark: SparkSession, condition: str) -> DataFrame:
    rules = parse_rules({"rule": [{"name": "slow", "metric": METRIC, "condition": condition}]})
    return rules_frame(spark, rules.rules)


def _latency(spark: SparkSession, values: list[tuple[float, float | None]]) -> DataFrame:
    rows: list[dict[str, Any]] = [
        {"metric_name": METRIC, "event_time": at(seconds), "value": value}
        for seconds, value in values
    ]
    rows.append({"metric_name": "other", "event_time": at(0), "value": 1e9})
    return points_frame(spark, rows)


def _inventory(spark: SparkSession) -> DataFrame:
    row = {
        "client_instance_id": "i-1",
        "client_id": "app",
        "client_source_address": "10.1.1.1",
        "client_source_port": 4242,
        # A resource attribute cannot override a label the gateway saw.
        "resource_attributes": {"group_id": "g", "client_id": "spoofed"},
    }
    schema = spark.createDataFrame([], INVENTORY_STATE).schema
    return spark.createDataFrame([tuple(row.get(name) for name in schema.names)], schema)


def _step(
    spark: SparkSession, rules: DataFrame, points: DataFrame, state: DataFrame
) -> tuple[DataFrame, DataFrame]:
    episodes = track_alert_episodes(evaluate_rules(points, rules), state, rules)
    events = select_alert_events(episodes, rules, _inventory(spark))
    return events, select_open_episodes(episodes)


def test_kip_rule_fires_only_after_more_than_180_seconds_then_resolves(
    spark: SparkSession,
) -> None:
    rules = _rules(spark, "exceeded 5000 ms for more than 180 seconds")
    empty = spark.createDataFrame([], ALERT_STATE)
    # 0..180 s above the threshold: exactly 180 s is not "more than" 180 s.
    first = _latency(spark, [(0, 6000.0), (60, 7000.0), (120, 6500.0), (180, 6100.0), (190, None)])
    events, state = _step(spark, rules, first, empty)
    assert events.count() == 0
    state = spark.createDataFrame(state.collect(), ALERT_STATE)
    second = _latency(spark, [(240, 9000.0), (300, 100.0), (360, 8000.0)])
    events, state = _step(spark, rules, second, state)
    assertDataFrameEqual(
        events.select("status", "started_at", "fired_at", "resolved_at", "peak"),
        [
            ("firing", naive(at(0)), naive(at(240)), None, 9000.0),
            ("resolved", naive(at(0)), naive(at(240)), naive(at(300)), 9000.0),
        ],
    )
    labels = events.first()["labels"]
    assert (labels["client_id"], labels["client_source_address"], labels["group_id"]) == (
        "app",
        "10.1.1.1",
        "g",
    )
    assert labels["client_source_port"] == "4242"
    assert events.select("alert_id").distinct().count() == 1
    # The episode started at 360 s is open and has not fired.
    assertDataFrameEqual(
        state.select("started_at", "last_true_at", "fired_at"),
        [(naive(at(360)), naive(at(360)), None)],
    )


def test_an_open_fired_episode_resolves_in_a_later_batch(spark: SparkSession) -> None:
    rules = _rules(spark, "below 10 for at least 60 seconds")
    empty = spark.createDataFrame([], ALERT_STATE)
    events, state = _step(spark, rules, _latency(spark, [(0, 5.0), (60, 1.0)]), empty)
    assertDataFrameEqual(
        events.select("status", "fired_at", "peak"), [("firing", naive(at(60)), 1.0)]
    )
    state = spark.createDataFrame(state.collect(), ALERT_STATE)
    events, state = _step(spark, rules, _latency(spark, [(120, 50.0)]), state)
    assertDataFrameEqual(
        events.select("status", "started_at", "resolved_at", "peak"),
        [("resolved", naive(at(0)), naive(at(120)), 1.0)],
    )
    assert state.count() == 0


def test_points_named_by_keeps_exact_and_prefixed_metrics_with_values(
    spark: SparkSession,
) -> None:
    rules = parse_rules(
        {
            "rule": [
                {"name": "exact", "metric": METRIC, "condition": "exceeded 1 ms for 1 second"},
                {"name": "p", "metric": "org.apache.kafka.consumer.", "op": "<", "threshold": 1},
            ]
        }
    )
    names = [METRIC, f"{METRIC}.max", "org.apache.kafka.consumer.x", "org.apache.kafka.c", METRIC]
    rows: list[dict[str, Any]] = [
        {"metric_name": name, "event_time": at(0), "value": 1.0} for name in names
    ]
    rows[-1]["value"] = None
    kept = points_named_by(points_frame(spark, rows), rules.rules)
    assertDataFrameEqual(kept.select("metric_name"), [(METRIC,), ("org.apache.kafka.consumer.x",)])

"""Alerts: a rule fires when its condition holds for the whole duration, and resolves after.

An *episode* is a run of consecutive points of one series on which a rule's
condition holds. It fires once the run has lasted the rule's duration (from its
first point to its latest; "more than" makes that strict) and resolves at the
first later point on which the condition fails. Episodes still open at the end
of a batch are carried to the next one as state, so an episode may span any
number of batches.

The alerts table is an event log: one ``firing`` row when an episode fires and
one ``resolved`` row when a fired episode ends, both carrying the client's
labels (the collection KIP-714's proactive-monitoring workflow describes), the
start, the peak value and, for ``resolved``, when it ended.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from clientmetrics.pipeline.arrow_alerts import ALERT_EVENT_COLUMNS, ALERT_STATE_ARROW
from clientmetrics.pipeline.clients import PUSH_LABELS
from clientmetrics.pipeline.rules import AlertRule

RULES_DDL = (
    "rule STRING, metric STRING, is_prefix BOOLEAN, op STRING, threshold DOUBLE,"
    " duration_seconds DOUBLE, strict BOOLEAN"
)

#: The alerts table, column by column.
ALERT_COLUMNS = (*ALERT_EVENT_COLUMNS, "date")

_STATE_COLUMNS = tuple(ALERT_STATE_ARROW.names)


def rules_frame(spark: SparkSession, rules: Sequence[AlertRule]) -> DataFrame:
    """The rules as a small DataFrame, to be broadcast against the points."""
    rows = [
        (r.name, r.metric, r.is_prefix, r.op, r.threshold, r.duration_seconds, r.strict)
        for r in rules
    ]
    return spark.createDataFrame(rows, RULES_DDL)


def _compare(op: Column, value: Column, threshold: Column) -> Column:
    return (
        F.when(op == ">", value > threshold)
        .when(op == ">=", value >= threshold)
        .when(op == "<", value < threshold)
        .when(op == "<=", value <= threshold)
        .when(op == "==", value == threshold)
        .when(op == "!=", value != threshold)
    )


def client_labels() -> Column:
    """The push's labels plus the client's resource attributes, as one map."""
    pairs: list[Column] = []
    for name in PUSH_LABELS:
        pairs += [F.lit(name), F.col(name).cast("string")]
    own = F.create_map(*pairs)
    resource = F.map_filter(
        F.coalesce(F.col("resource_attributes"), F.create_map().cast("map<string,string>")),
        lambda key, _value: ~key.isin(*PUSH_LABELS, "client_instance_id"),
    )
    return F.map_concat(
        F.create_map(F.lit("client_instance_id"), F.col("client_instance_id")), own, resource
    )


def points_named_by(points: DataFrame, rules: Sequence[AlertRule]) -> DataFrame:
    """Only the points of metrics some rule names, with a value.

    Plain literal conditions (no join), so Parquet can skip row groups and the
    rule join that follows sees only candidate rows.
    """
    names = [rule.metric for rule in rules if not rule.is_prefix]
    named = F.col("metric_name").isin(*names) if names else F.lit(False)
    for rule in rules:
        if rule.is_prefix:
            named = named | F.col("metric_name").startswith(rule.metric)
    return points.where(named & F.col("value").isNotNull()).select("*")


def evaluate_rules(points: DataFrame, rules: DataFrame) -> DataFrame:
    """Points of the metrics a rule names, each with whether the rule's condition holds."""
    names_match = (F.col("metric_name") == F.col("metric")) | (
        F.col("is_prefix") & F.col("metric_name").startswith(F.col("metric"))
    )
    return (
        points.where(F.col("value").isNotNull())
        .join(F.broadcast(rules), names_match)
        .select(
            "rule",
            "series",
            "client_instance_id",
            "metric_name",
            "attributes",
            "event_time",
            "value",
            _compare(F.col("op"), F.col("value"), F.col("threshold")).alias("holds"),
        )
    )


def _held(started: Column, now: Column, duration: Column, strict: Column) -> Column:
    seconds = (F.unix_micros(now) - F.unix_micros(started)) / F.lit(1_000_000.0)
    return F.when(strict, seconds > duration).otherwise(seconds >= duration)


def track_alert_episodes(evaluated: DataFrame, state: DataFrame, rules: DataFrame) -> DataFrame:
    """Every episode touched by this batch: carried ones and new ones, open or resolved.

    Columns: the state's, plus ``episode`` (0 continues the carried one),
    ``resolved_at`` and ``newly_fired``.
    """
    keys = ["rule", "series"]
    # Only series on which a rule holds somewhere, or that carry an open
    # episode, can change an alert: the rest skip the per-series sorts.
    active = (
        evaluated.where(F.col("holds")).select(*keys).unionByName(state.select(*keys)).distinct()
    )
    evaluated = evaluated.join(active, keys, "left_semi")
    order = Window.partitionBy(*keys).orderBy("event_time")
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    rows = evaluated.select(
        "*", F.sum(F.when(~F.col("holds"), 1).otherwise(0)).over(running).alias("episode")
    )
    carried = state.select(
        *keys,
        F.col("started_at").alias("_carried_start"),
        F.col("fired_at").alias("_carried_fired"),
    )
    rows = rows.join(carried, keys, "left").join(F.broadcast(rules), "rule")
    in_episode = Window.partitionBy(*keys, "episode")
    first_true = F.min(F.when(F.col("holds"), F.col("event_time"))).over(in_episode)
    start = F.when(
        (F.col("episode") == 0) & F.col("_carried_start").isNotNull(), F.col("_carried_start")
    ).otherwise(first_true)
    rows = rows.select("*", start.alias("_start"))
    satisfied = F.col("holds") & _held(
        F.col("_start"), F.col("event_time"), F.col("duration_seconds"), F.col("strict")
    )
    trues = (
        rows.where(F.col("holds"))
        .groupBy(
            *keys,
            "episode",
            "client_instance_id",
            "metric_name",
            F.array_sort(F.map_entries("attributes")).alias("entries"),
        )
        .agg(
            F.min("_start").alias("started_at"),
            F.max("event_time").alias("last_true_at"),
            F.max("value").alias("high"),
            F.min("value").alias("low"),
            F.min(F.when(satisfied, F.col("event_time"))).alias("fired_at"),
        )
        .select("*", F.map_from_entries("entries").alias("attributes"))
        .drop("entries")
    )
    closes = rows.where(~F.col("holds")).select(
        *keys, (F.col("episode") - 1).alias("episode"), F.col("event_time").alias("resolved_at")
    )
    previous = state.select(*_STATE_COLUMNS, F.lit(0).cast("bigint").alias("episode"))
    merged = _merge_with_carried(trues, previous, keys)
    return merged.join(closes, [*keys, "episode"], "left").select(
        *_STATE_COLUMNS,
        "episode",
        "resolved_at",
        (F.col("fired_at").isNotNull() & F.col("_carried_fired").isNull()).alias("newly_fired"),
    )


def _merge_with_carried(trues: DataFrame, previous: DataFrame, keys: list[str]) -> DataFrame:
    t, p = trues.alias("t"), previous.alias("p")
    joined = t.join(p, [*keys, "episode"], "full")

    def pick(name: str) -> Column:
        return F.coalesce(F.col(f"p.{name}"), F.col(f"t.{name}")).alias(name)

    return joined.select(
        *keys,
        "episode",
        pick("client_instance_id"),
        pick("metric_name"),
        pick("attributes"),
        pick("started_at"),
        F.greatest(F.col("t.last_true_at"), F.col("p.last_true_at")).alias("last_true_at"),
        F.greatest(F.col("t.high"), F.col("p.high")).alias("high"),
        F.least(F.col("t.low"), F.col("p.low")).alias("low"),
        pick("fired_at"),
        F.col("p.fired_at").alias("_carried_fired"),
    )


def select_alert_events(episodes: DataFrame, rules: DataFrame, inventory: DataFrame) -> DataFrame:
    """The alerts table rows this batch adds: ``firing`` and ``resolved`` events.

    Each carries the client's labels from the inventory (``clients``): its
    latest client id, address, principal, software and resource attributes.
    """
    labels = inventory.select("client_instance_id", client_labels().alias("labels"))
    with_rule = episodes.join(F.broadcast(rules), "rule").join(labels, "client_instance_id", "left")
    peak = F.when(F.col("op").isin("<", "<="), F.col("low")).otherwise(F.col("high"))
    alert_id = F.sha2(
        F.concat_ws("|", F.col("rule"), F.col("series"), F.col("started_at").cast("string")), 256
    ).substr(1, 32)
    firing = with_rule.where(F.col("newly_fired")).select(
        "*", F.lit("firing").alias("status"), F.lit(None).cast("timestamp").alias("_resolved")
    )
    resolved = with_rule.where(F.col("fired_at").isNotNull() & F.col("resolved_at").isNotNull())
    resolved = resolved.select(
        "*", F.lit("resolved").alias("status"), F.col("resolved_at").alias("_resolved")
    )
    return firing.unionByName(resolved).select(
        alert_id.alias("alert_id"),
        "rule",
        "status",
        "client_instance_id",
        "metric_name",
        "attributes",
        "labels",
        "started_at",
        "fired_at",
        F.col("_resolved").alias("resolved_at"),
        peak.alias("peak"),
        "op",
        "threshold",
        "duration_seconds",
        F.to_date(F.coalesce(F.col("_resolved"), F.col("fired_at"))).alias("date"),
    )


def select_open_episodes(episodes: DataFrame) -> DataFrame:
    """The alert state to carry into the next batch: episodes that have not resolved."""
    return episodes.where(F.col("resolved_at").isNull()).select(*_STATE_COLUMNS)

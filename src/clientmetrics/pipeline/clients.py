"""The client inventory KIP-714's workflows need, one row per client instance.

Built from the landed pushes themselves (empty pushes included: they are how a
live client with nothing subscribed is told from a dead one) and from the
resource attributes librdkafka puts in its payloads (group id, member id,
transactional id, rack).
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

#: Labels taken from the latest push of an instance.
PUSH_LABELS = (
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
    "principal",
    "node_id",
    "push_interval_ms",
)

#: Resource attributes librdkafka sends, promoted to columns.
RESOURCE_LABELS = ("group_id", "group_instance_id", "member_id", "transactional_id", "client_rack")

#: The carried inventory, column by column (the clients table less ``silent`` and ``date``).
INVENTORY_COLUMNS = (
    "client_instance_id",
    *PUSH_LABELS,
    "resource_attributes",
    "resource_seen",
    "first_seen",
    "last_seen",
    "last_push",
    "pushes",
    "terminated",
)

#: The clients table, column by column.
CLIENT_COLUMNS = (
    "client_instance_id",
    *PUSH_LABELS,
    *RESOURCE_LABELS,
    "resource_attributes",
    "first_seen",
    "last_seen",
    "last_push",
    "pushes",
    "terminated",
    "silent",
    "date",
)


def aggregate_client_pushes(pushes: DataFrame, points: DataFrame) -> DataFrame:
    """This batch's view of each client instance, in the inventory's shape.

    ``last_push`` is the last push that carried metrics; ``last_seen`` counts
    empty pushes too; ``terminated`` is whether the latest push was terminating.
    """
    return client_view(pushes, latest_resources(points))


def latest_resources(points: DataFrame) -> DataFrame:
    """Per instance, the resource attributes of its latest point and when that push came."""
    # Group by the attribute set first: a map-valued max_by over every point
    # would need a sort; a hash aggregate leaves a handful of rows per client.
    entries = F.array_sort(F.map_entries("resource_attributes"))
    return (
        points.groupBy("client_instance_id", entries.alias("entries"))
        .agg(F.max("received_at").alias("seen"))
        .groupBy("client_instance_id")
        .agg(
            F.max_by("entries", "seen").alias("entries"),
            F.max("seen").alias("resource_seen"),
        )
        .select(
            "client_instance_id",
            F.map_from_entries("entries").alias("resource_attributes"),
            "resource_seen",
        )
    )


def client_view(pushes: DataFrame, resources: DataFrame) -> DataFrame:
    """``aggregate_client_pushes`` from the pushes and each instance's latest resource attributes.

    ``resources`` has ``client_instance_id``, ``resource_attributes`` and
    ``resource_seen`` (``latest_resources``, or the decode pass's side output).
    """
    latest = F.max_by(F.struct(*PUSH_LABELS, "terminating"), "received_at")
    by_push = pushes.groupBy("client_instance_id").agg(
        latest.alias("latest"),
        F.min("received_at").alias("first_seen"),
        F.max("received_at").alias("last_seen"),
        F.max(F.when(F.length("payload") > 0, F.col("received_at"))).alias("last_push"),
        F.count(F.lit(1)).alias("pushes"),
    )
    by_resource = resources.select("client_instance_id", "resource_attributes", "resource_seen")
    joined = by_push.join(by_resource, "client_instance_id", "left")
    return joined.select(*_inventory_columns(terminated="terminating"))


def merge_inventory(inventory: DataFrame, batch: DataFrame) -> DataFrame:
    """Fold this batch's view into the carried inventory."""
    latest = F.max_by(F.struct(*PUSH_LABELS, "terminated"), "last_seen")
    return (
        inventory.select(*INVENTORY_COLUMNS)
        .unionByName(batch.select(*INVENTORY_COLUMNS))
        .groupBy("client_instance_id")
        .agg(
            latest.alias("latest"),
            F.max_by("resource_attributes", "resource_seen").alias("resource_attributes"),
            F.max("resource_seen").alias("resource_seen"),
            F.min("first_seen").alias("first_seen"),
            F.max("last_seen").alias("last_seen"),
            F.max("last_push").alias("last_push"),
            F.sum("pushes").alias("pushes"),
        )
        .select(*_inventory_columns(terminated="terminated"))
    )


def _inventory_columns(*, terminated: str) -> list[Column]:
    """``INVENTORY_COLUMNS`` from an aggregate whose ``latest`` struct holds the push labels."""
    latest = {name: F.col(f"latest.{name}") for name in PUSH_LABELS}
    latest["terminated"] = F.col(f"latest.{terminated}")
    return [
        latest[name].alias(name) if name in latest else F.col(name) for name in INVENTORY_COLUMNS
    ]


def with_client_status(inventory: DataFrame, now: datetime) -> DataFrame:
    """The clients table: promote resource labels and mark instances that went silent.

    An instance is silent when it has not pushed for three of its push
    intervals and did not say goodbye with a terminating push.
    """
    idle_ms = (F.unix_micros(F.lit(now)) - F.unix_micros(F.col("last_seen"))) / F.lit(1000)
    silent = ~F.coalesce(F.col("terminated"), F.lit(False)) & (
        idle_ms > F.lit(3) * F.col("push_interval_ms")
    )
    return inventory.select(
        "client_instance_id",
        *PUSH_LABELS,
        *(F.col("resource_attributes").getItem(name).alias(name) for name in RESOURCE_LABELS),
        "resource_attributes",
        "first_seen",
        "last_seen",
        "last_push",
        "pushes",
        "terminated",
        silent.alias("silent"),
        F.to_date("last_seen").alias("date"),
    )

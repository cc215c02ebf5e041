"""Every table and state schema of the pipeline, in Arrow, defined once.

The landing schema is the contract with the gateway (docs/landing.md); the
rest is what the core makes of it. The Spark shell derives its StructTypes
from these.
"""

from __future__ import annotations

import pyarrow as pa

from clientmetrics.telemetry import push_arrow
from clientmetrics.telemetry.otlp_arrow import POINT_SCHEMA

TIMESTAMP = pa.timestamp("us", tz="UTC")
STRING_MAP = pa.map_(pa.string(), pa.string())

#: The landing contract (docs/landing.md): one row per accepted push, derived
#: from the one model of an accepted push (``telemetry.model.AcceptedPush``).
LANDING_ARROW = push_arrow.LANDING_ARROW
#: Where the landing contract's files are (``telemetry.push_arrow``), for the dashboard.
landed_pushes = push_arrow.landed_pushes
LANDED_FILES = push_arrow.LANDED_FILES

#: Landing columns copied onto every data point (the broker's labels).
LABEL_COLUMNS = tuple(
    name for name in LANDING_ARROW.names if name not in ("payload", "compression_type")
)

#: One row per data point as the decoder leaves it: labels, then the OTLP fields.
DECODED_ARROW = pa.schema(
    [LANDING_ARROW.field(name) for name in LABEL_COLUMNS]
    + [field for field in POINT_SCHEMA if field.name != "row"]
)

#: A points table row as written (its ``date``, of ``event_time``, is the directory).
POINTS_ARROW = pa.schema(
    [
        *DECODED_ARROW,
        ("series", pa.string()),
        ("cumulative_value", pa.float64()),
        ("rate_per_second", pa.float64()),
    ]
)

#: Per series, what the temporality normaliser carries from one batch to the next.
SERIES_STATE_ARROW = pa.schema(
    [
        ("series", pa.string()),
        ("last_time", TIMESTAMP),
        ("last_start", TIMESTAMP),
        ("last_cumulative", pa.float64()),
    ]
)

#: Open (not yet closed by the watermark) per-client windows: partial aggregates.
WINDOW_STATE_ARROW = pa.schema(
    [
        ("series", pa.string()),
        ("client_instance_id", pa.string()),
        ("metric_name", pa.string()),
        ("attributes", STRING_MAP),
        ("window_start", TIMESTAMP),
        ("window_end", TIMESTAMP),
        ("count", pa.int64()),
        ("sum", pa.float64()),
        ("min", pa.float64()),
        ("max", pa.float64()),
        ("last", pa.float64()),
        ("last_time", TIMESTAMP),
    ]
)

#: A client_windows table row as written (its ``date``, of ``window_start``, is the directory).
CLIENT_WINDOWS_ARROW = pa.schema(
    [
        *(
            WINDOW_STATE_ARROW.field(name)
            for name in (
                "client_instance_id",
                "metric_name",
                "attributes",
                "window_start",
                "window_end",
                "count",
                "min",
                "max",
            )
        ),
        ("avg", pa.float64()),
        WINDOW_STATE_ARROW.field("last"),
    ]
)

#: Labels an instance's inventory row takes from its latest push (not the same set as
#: ``telemetry.model.PUSH_LABELS``, every label the broker adds to a push).
INVENTORY_LABELS = (
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
    "principal",
    "node_id",
    "push_interval_ms",
)

#: Resource attributes librdkafka sends, promoted to columns of the clients table.
RESOURCE_LABELS = ("group_id", "group_instance_id", "member_id", "transactional_id", "client_rack")

#: The client inventory (carried state), one row per instance: also a batch's view of it.
INVENTORY_ARROW = pa.schema(
    [
        ("client_instance_id", pa.string()),
        *(LANDING_ARROW.field(name) for name in INVENTORY_LABELS),
        ("resource_attributes", STRING_MAP),
        ("resource_seen", TIMESTAMP),
        ("first_seen", TIMESTAMP),
        ("last_seen", TIMESTAMP),
        ("last_push", TIMESTAMP),
        ("pushes", pa.int64()),
        ("terminated", pa.bool_()),
        #: KIP-714 standard metrics the instance has sent (any push; ``coverage.py``).
        ("standard_metrics", pa.list_(pa.string())),
    ]
)

#: A clients table row as written (its ``date``, of ``last_seen``, is the directory).
CLIENTS_ARROW = pa.schema(
    [
        ("client_instance_id", pa.string()),
        *(LANDING_ARROW.field(name) for name in INVENTORY_LABELS),
        *((name, pa.string()) for name in RESOURCE_LABELS),
        ("resource_attributes", STRING_MAP),
        ("first_seen", TIMESTAMP),
        ("last_seen", TIMESTAMP),
        ("last_push", TIMESTAMP),
        ("pushes", pa.int64()),
        ("terminated", pa.bool_()),
        ("standard_metrics", pa.list_(pa.string())),
        ("silent", pa.bool_()),
    ]
)

#: Open alert episodes (carried state).
ALERT_STATE_ARROW = pa.schema(
    [
        ("rule", pa.string()),
        ("series", pa.string()),
        ("client_instance_id", pa.string()),
        ("metric_name", pa.string()),
        ("attributes", STRING_MAP),
        ("started_at", TIMESTAMP),
        ("last_true_at", TIMESTAMP),
        ("high", pa.float64()),
        ("low", pa.float64()),
        ("fired_at", TIMESTAMP),
    ]
)

#: Every episode a batch touched.
EPISODES_ARROW = pa.schema(
    [
        *ALERT_STATE_ARROW,
        ("episode", pa.int64()),
        ("resolved_at", TIMESTAMP),
        ("newly_fired", pa.bool_()),
        # The extremes up to the firing point: a firing event's peak, whatever the batches.
        ("fired_high", pa.float64()),
        ("fired_low", pa.float64()),
    ]
)

#: An alerts table row as written (its ``date``, of the event, is the directory).
ALERTS_ARROW = pa.schema(
    [
        ("alert_id", pa.string()),
        ("rule", pa.string()),
        ("status", pa.string()),
        ("client_instance_id", pa.string()),
        ("metric_name", pa.string()),
        ("attributes", STRING_MAP),
        ("labels", STRING_MAP),
        ("started_at", TIMESTAMP),
        ("fired_at", TIMESTAMP),
        ("resolved_at", TIMESTAMP),
        ("peak", pa.float64()),
        ("op", pa.string()),
        ("threshold", pa.float64()),
        ("duration_seconds", pa.float64()),
        # Why a ``resolved`` event resolved (``RESOLUTIONS``); null on ``firing``.
        ("resolution", pa.string()),
    ]
)

#: Why an alert resolves: its condition stopped holding, its client said goodbye with
#: a terminating push, or its client went silent (no push for 3 × its interval).
RESOLUTIONS = ("cleared", "terminated", "expired")

#: How far the pipeline has got (one row): the event-time high-water mark, and
#: the newest push received (what ``silent`` is judged against).
PROGRESS_ARROW = pa.schema([("max_event_time", TIMESTAMP), ("max_received_at", TIMESTAMP)])


#: Where a push came from, when it came from somewhere a dead letter can name: its
#: landed file (``source``), or its topic record (``topic``, ``partition``, ``offset``).
ORIGIN_ARROW = pa.schema(
    [
        ("source", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
    ]
)

#: The dead letters (``rejected`` table): what the pipeline skipped, where it was and why
#: (``core.rejects``). One row per rejected record or push, or per push and reason for its
#: points (``count`` of them). Its ``date``, of ``received_at``, is the directory.
REJECTED_ARROW = pa.schema(
    [
        #: When the push (or record) was received; null when that is what was wrong.
        ("received_at", TIMESTAMP),
        *ORIGIN_ARROW,
        #: The instance id, when it is a valid one.
        ("client_instance_id", pa.string()),
        ("reason", pa.string()),
        #: The value at fault: a header's name, ``key``, ``payload``, an OTLP field.
        ("field", pa.string()),
        #: The start of the value at fault (or, for a point, its metric and value), bounded.
        ("excerpt", pa.binary()),
        #: Records or points this row stands for.
        ("count", pa.int64()),
    ]
)


#: Per series a baseline judges, its own recent profile (carried state, ``core/baselines``):
#: how many points it has learnt from, its first points while it learns (at most
#: ``baselines.WARMUP``), their weighted mean and variance, how many consecutive points
#: were out of profile, and the latest point's time.
BASELINE_STATE_ARROW = pa.schema(
    [
        ("series", pa.string()),
        ("baseline_count", pa.int64()),
        ("baseline_warmup", pa.list_(pa.float64())),
        ("baseline_mean", pa.float64()),
        ("baseline_var", pa.float64()),
        ("baseline_out", pa.int64()),
        ("last_time", TIMESTAMP),
        # Whether the series' latest judged point was out of profile, of its cohort
        # (``baselines.forgive``: one point back in does not end a departure yet).
        ("profile_out", pa.bool_()),
        ("cohort_out", pa.bool_()),
    ]
)

#: One batch's points of a cohort's series (``cohort`` and ``key``: the series key
#: without its instance), summed by one task, for the driver to merge (``core/baselines``).
COHORT_PARTIALS_ARROW = pa.schema(
    [
        ("cohort", pa.string()),
        ("key", pa.string()),
        ("points", pa.int64()),
        ("instances", pa.int64()),
        ("total", pa.float64()),
        ("total_squares", pa.float64()),
        ("last_time", TIMESTAMP),
    ]
)

#: Each cohort's profile per series key (state the driver keeps between batches).
COHORT_STATE_ARROW = pa.schema(
    [
        ("cohort", pa.string()),
        ("key", pa.string()),
        ("points", pa.int64()),
        ("members", pa.int64()),
        ("mean", pa.float64()),
        ("var", pa.float64()),
        ("last_time", TIMESTAMP),
    ]
)


def _carried_fields() -> list[pa.Field]:
    """The state schemas' columns, each once, less those the pushes already have."""
    seen = {*LABEL_COLUMNS, "payload", *ORIGIN_ARROW.names}
    fields = []
    for schema in CARRIED_SCHEMAS:
        for state_field in schema:
            if state_field.name not in seen:
                seen.add(state_field.name)
                fields.append(state_field)
    return fields


#: The carried state's schemas, in the order of ``CARRIED``.
CARRIED_SCHEMAS = (
    SERIES_STATE_ARROW,
    WINDOW_STATE_ARROW,
    ALERT_STATE_ARROW,
    INVENTORY_ARROW,
    BASELINE_STATE_ARROW,
)

#: The input of one batch's pass: pushes (``carried`` null: labels and payload),
#: and the carried state of their instances (``carried`` names the state:
#: ``series``, ``window``, ``alert``, ``client`` or ``baseline``).
PASS_INPUT_ARROW = pa.schema(
    [
        *(LANDING_ARROW.field(name) for name in LABEL_COLUMNS),
        LANDING_ARROW.field("payload"),
        *ORIGIN_ARROW,
        ("carried", pa.string()),
        *_carried_fields(),
    ]
)

#: What a state row of each kind carries, by its ``carried`` tag.
CARRIED = {
    "series": SERIES_STATE_ARROW,
    "window": WINDOW_STATE_ARROW,
    "alert": ALERT_STATE_ARROW,
    "client": INVENTORY_ARROW,
    "baseline": BASELINE_STATE_ARROW,
}

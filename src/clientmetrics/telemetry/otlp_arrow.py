"""Columnar OTLP decoding: a batch of ``MetricsData`` payloads to one Arrow row per data point.

The payloads are parsed by ``ptars`` (a Rust protobuf-to-Arrow transcoder) into
one nested Arrow row per payload; everything after that is Arrow compute on
whole columns (``list_flatten``, ``list_parent_indices``, ``take``), so there is
no Python loop per data point, metric or payload on the fast path. That is what
lets the Spark pipeline decode near its Parquet-scan ceiling (measurements in
``docs/pipeline.md``).

All five OTLP metric kinds decode. Histograms keep their buckets, exponential
histograms their scale, offsets and buckets, summaries their quantiles. The
``value`` column is the point's number for gauges and sums and its ``sum`` for
the three distribution kinds, so one numeric column serves alert rules and
windows whatever the kind.

Attribute values become strings in a ``map<string, string>``: librdkafka sends
``node.id`` as an int, and a string map keeps per-broker copies of a metric as
distinct series without a union-typed map. Array, key-list and bytes values
(which no Kafka client sends) become null. Point attribute keys that are aliases
of one label (``naming.ATTRIBUTE_ALIASES``: ``node_id`` for ``node.id``) come out
under the one key, and its values spelled the one way (``naming.ATTRIBUTE_VALUES``:
the Java client's ``node-1`` is ``1``), so every client's broker is one label.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import ptars
import pyarrow as pa
import pyarrow.compute as pc
from opentelemetry.proto.metrics.v1 import metrics_pb2

from clientmetrics.telemetry.naming import ATTRIBUTE_ALIASES, ATTRIBUTE_VALUES

#: The OTLP metric kinds, named as the ``kind`` column spells them.
KINDS = ("gauge", "sum", "histogram", "exponential_histogram", "summary")

#: ``AggregationTemporality`` enum values, by number.
TEMPORALITIES = ("unspecified", "delta", "cumulative")

_STRING_MAP = pa.map_(pa.string(), pa.string())
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_QUANTILE = pa.struct([("quantile", pa.float64()), ("value", pa.float64())])

#: One row per data point; ``row`` is the index of the payload it came from.
POINT_SCHEMA = pa.schema(
    [
        ("row", pa.int32()),
        ("resource_attributes", _STRING_MAP),
        ("scope_name", pa.string()),
        ("scope_version", pa.string()),
        ("metric_name", pa.string()),
        ("metric_unit", pa.string()),
        ("kind", pa.string()),
        ("temporality", pa.string()),
        ("monotonic", pa.bool_()),
        ("start_time", _TIMESTAMP),
        ("event_time", _TIMESTAMP),
        ("value", pa.float64()),
        ("attributes", _STRING_MAP),
        ("count", pa.int64()),
        ("min", pa.float64()),
        ("max", pa.float64()),
        ("bucket_counts", pa.list_(pa.int64())),
        ("explicit_bounds", pa.list_(pa.float64())),
        ("scale", pa.int32()),
        ("zero_count", pa.int64()),
        ("positive_offset", pa.int32()),
        ("positive_bucket_counts", pa.list_(pa.int64())),
        ("negative_offset", pa.int32()),
        ("negative_bucket_counts", pa.list_(pa.int64())),
        ("quantiles", pa.list_(_QUANTILE)),
    ]
)


#: The largest count a point may carry: counts are unsigned 64-bit in OTLP, signed in the tables.
MAX_COUNT = 2**63 - 1


@dataclass(frozen=True, slots=True)
class DecodedPoints:
    """The data points of a batch of payloads and the payloads that failed to parse."""

    points: pa.RecordBatch
    #: Indices (into the input) of payloads that are not valid ``MetricsData``.
    malformed: tuple[int, ...]
    #: Per point: the OTLP field whose value the tables cannot hold (a count above
    #: ``MAX_COUNT``: ``count``, ``zero_count`` or ``bucket_counts``), else null. Such a
    #: point's counts are null in ``points``; the caller decides what it costs.
    problems: pa.Array | None = None


@cache
def _handler() -> Any:
    pool = ptars.HandlerPool([metrics_pb2.DESCRIPTOR])
    return pool.get_for_message(metrics_pb2.MetricsData.DESCRIPTOR)


def decode_points(
    payloads: pa.Array | pa.ChunkedArray, drop_resource_keys: tuple[str, ...] = ()
) -> DecodedPoints:
    """Decode serialized ``MetricsData`` payloads into one row per data point.

    Empty payloads (KIP-714's empty pushes) yield no rows. A payload that is not
    valid protobuf yields no rows and is reported in ``malformed``; the others
    still decode. Resource attributes named in ``drop_resource_keys`` are left
    out (an ``ExportMetricsServiceRequest`` decodes too, its field 1 being
    ``MetricsData``'s, and carries the broker's labels there).
    """
    binary = _as_binary(payloads)
    malformed: tuple[int, ...] = ()
    try:
        nested = _handler().array_to_record_batch(binary)
    except ValueError:  # ptars reports bad bytes for the whole batch; find the rows
        binary, malformed = _without_malformed(binary)
        nested = _handler().array_to_record_batch(binary)
    points, problems = _flatten(nested, drop_resource_keys)
    return DecodedPoints(points=points, malformed=malformed, problems=problems)


def _as_binary(payloads: pa.Array | pa.ChunkedArray) -> pa.Array:
    array = payloads.combine_chunks() if isinstance(payloads, pa.ChunkedArray) else payloads
    if pa.types.is_large_binary(array.type):
        array = array.cast(pa.binary())
    return pc.fill_null(array, b"")


def _without_malformed(binary: pa.Array) -> tuple[pa.Array, tuple[int, ...]]:
    """Replace payloads that fail to parse by empty ones (slow path, errors only)."""
    handler = _handler()
    values: list[bytes] = binary.to_pylist()
    bad: list[int] = []
    for index, value in enumerate(values):
        try:
            handler.list_to_record_batch([value])
        except ValueError:
            bad.append(index)
            values[index] = b""
    return pa.array(values, pa.binary()), tuple(bad)


def _flatten(
    nested: pa.RecordBatch, drop_resource_keys: tuple[str, ...]
) -> tuple[pa.RecordBatch, pa.Array]:
    resources = nested.column("resource_metrics")
    resource_row = pc.list_parent_indices(resources)
    resource = pc.list_flatten(resources)
    resource_attributes = attributes_to_map(
        pc.struct_field(resource, ["resource", "attributes"]), drop=drop_resource_keys
    )

    scopes = pc.struct_field(resource, "scope_metrics")
    scope_resource = pc.list_parent_indices(scopes)
    scope = pc.list_flatten(scopes)

    metrics = pc.struct_field(scope, "metrics")
    metric_scope = pc.list_parent_indices(metrics)
    metric = pc.list_flatten(metrics)
    kinds = [found for kind in KINDS if (found := _kind_points(kind, metric)) is not None]
    point_metric = _gather(kinds, pa.field("_metric", pa.int64()), None)
    # Keep the payload's metric order (the kinds were decoded one after another):
    # a stable sort of the points' metric numbers, taken once per column. Per-metric
    # columns are reached through integer indices and copied once, for every point.
    order = pc.sort_indices(point_metric) if len(kinds) > 1 else None
    if order is not None:
        point_metric = point_metric.take(order)
    point_scope = pc.take(metric_scope, point_metric)
    point_resource = pc.take(scope_resource, point_scope)
    per_point = {
        "row": pc.cast(pc.take(resource_row, point_resource), pa.int32()),
        "resource_attributes": pc.take(resource_attributes, point_resource),
        "scope_name": pc.take(pc.struct_field(scope, ["scope", "name"]), point_scope),
        "scope_version": pc.take(pc.struct_field(scope, ["scope", "version"]), point_scope),
        "metric_name": pc.take(pc.struct_field(metric, "name"), point_metric),
        "metric_unit": pc.take(pc.struct_field(metric, "unit"), point_metric),
    }
    arrays = [
        per_point[field.name] if field.name in per_point else _gather(kinds, field, order)
        for field in POINT_SCHEMA
    ]
    problems = _gather(kinds, pa.field("_problem", pa.string()), order)
    return pa.RecordBatch.from_arrays(arrays, schema=POINT_SCHEMA), problems


def _gather(kinds: list[dict[str, pa.Array]], field: pa.Field, order: pa.Array | None) -> pa.Array:
    """One column of every kind's points, in ``order``; all-null columns are made, not copied."""
    sizes = [len(points["_metric"]) for points in kinds]
    if not any(field.name in points for points in kinds):
        return pa.nulls(sum(sizes), field.type)
    parts = [
        # Counts above the target's range were nulled (``_counts_in_range``): no cast fails.
        pc.cast(points[field.name], field.type, safe=False)
        if field.name in points
        else pa.nulls(size, field.type)
        for points, size in zip(kinds, sizes, strict=True)
    ]
    array = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
    return array if order is None else array.take(order)


def _kind_points(kind: str, metric: pa.Array) -> dict[str, pa.Array] | None:
    """The columns a kind's points have (``_metric``: each one's metric), or None if it has none."""
    data = pc.struct_field(metric, kind)
    lists = pc.struct_field(data, "data_points")
    point_metric = pc.list_parent_indices(lists)
    if not len(point_metric):
        return None
    point = pc.list_flatten(lists)
    size = len(point)
    columns: dict[str, pa.Array] = {"_metric": point_metric}
    columns["kind"] = pa.repeat(pa.scalar(kind, pa.string()), size)
    if kind not in ("gauge", "summary"):
        columns["temporality"] = _temporality(data, point_metric)
    if kind == "sum":
        columns["monotonic"] = pc.take(pc.struct_field(data, "is_monotonic"), point_metric)
    columns["start_time"] = _timestamp(pc.struct_field(point, "start_time_unix_nano"))
    columns["event_time"] = _timestamp(pc.struct_field(point, "time_unix_nano"))
    columns["attributes"] = attributes_to_map(
        pc.struct_field(point, "attributes"), aliases=ATTRIBUTE_ALIASES, values=ATTRIBUTE_VALUES
    )
    columns.update(_values(kind, point))
    problem = _counts_in_range(columns)
    if problem is not None:
        columns["_problem"] = problem
    return columns


#: Unsigned count columns, in the order a point's problem names them.
_COUNTS = (
    "count",
    "zero_count",
    "bucket_counts",
    "positive_bucket_counts",
    "negative_bucket_counts",
)


def _counts_in_range(columns: dict[str, pa.Array]) -> pa.Array | None:
    """Null every count above ``MAX_COUNT`` (the tables' counts are signed); name the first.

    Returns each point's first out-of-range field (null when none), or None when
    every count fits. A list is nulled whole when one of its counts does not fit.
    """
    problem: pa.Array | None = None
    ceiling = pa.scalar(MAX_COUNT, pa.uint64())
    for name in reversed(_COUNTS):
        if name not in columns:
            continue
        values = columns[name]
        if pa.types.is_list(values.type):
            flat = pc.list_flatten(values)
            over = np.flatnonzero(pc.fill_null(pc.greater(flat, ceiling), False).to_numpy(False))
            bad = np.zeros(len(values), dtype=bool)
            bad[pc.list_parent_indices(values).to_numpy()[over]] = True
        else:
            bad = pc.fill_null(pc.greater(values, ceiling), False).to_numpy(False)
        if not bad.any():
            continue
        mask = pa.array(bad)
        columns[name] = pc.if_else(mask, pa.nulls(len(values), values.type), values)
        named = pa.repeat(
            pa.scalar(name.removeprefix("positive_").removeprefix("negative_")), len(values)
        )
        problem = pc.if_else(
            mask, named, problem if problem is not None else pa.nulls(len(values), pa.string())
        )
    return problem


def _temporality(data: pa.Array, point_metric: pa.Array) -> pa.Array:
    numbers = pc.take(pc.struct_field(data, "aggregation_temporality"), point_metric)
    known = pc.if_else(pc.less_equal(numbers, 2), numbers, 0)
    return pc.take(pa.array(TEMPORALITIES), known)


def _timestamp(nanos: pa.Array) -> pa.Array:
    # Divided while unsigned: any uint64 of nanoseconds is a µs count int64 holds
    # (2^64 - 1 ns is in the year 2554), so no value a client sends fails the cast.
    micros = pc.divide(pc.cast(nanos, pa.uint64()), pa.scalar(1000, pa.uint64()))
    return pc.cast(pc.cast(micros, pa.int64()), _TIMESTAMP)


def _values(kind: str, point: pa.Array) -> dict[str, pa.Array]:
    if kind in ("gauge", "sum"):
        # Unsafe: an int above 2^53 becomes the nearest double instead of failing the batch.
        as_int = pc.cast(pc.struct_field(point, "as_int"), pa.float64(), safe=False)
        return {"value": pc.coalesce(pc.struct_field(point, "as_double"), as_int)}
    values = {
        "value": pc.struct_field(point, "sum"),
        "count": pc.struct_field(point, "count"),
    }
    if kind == "summary":
        values["quantiles"] = pc.struct_field(point, "quantile_values")
        return values
    values["min"] = pc.struct_field(point, "min")
    values["max"] = pc.struct_field(point, "max")
    if kind == "histogram":
        values["bucket_counts"] = pc.struct_field(point, "bucket_counts")
        values["explicit_bounds"] = pc.struct_field(point, "explicit_bounds")
        return values
    values["scale"] = pc.struct_field(point, "scale")
    values["zero_count"] = pc.struct_field(point, "zero_count")
    for side in ("positive", "negative"):
        values[f"{side}_offset"] = pc.struct_field(point, [side, "offset"])
        values[f"{side}_bucket_counts"] = pc.struct_field(point, [side, "bucket_counts"])
    return values


def attributes_to_map(
    key_values: pa.Array,
    aliases: Mapping[str, str] | None = None,
    values: Mapping[str, tuple[str, str]] | None = None,
    drop: tuple[str, ...] = (),
) -> pa.MapArray:
    """Turn a list of OTLP ``KeyValue`` structs into a ``map<string, string>`` per row.

    A null list becomes an empty map. Ints, doubles and bools are rendered as
    text (``111``, ``0.5``, ``true``); array, key-list and bytes values become null.
    Keys found in ``aliases`` are renamed to its value; then the values of a key in
    ``values`` are rewritten by its ``(pattern, replacement)``; keys in ``drop`` are
    left out.
    """
    lengths = pc.fill_null(pc.list_value_length(key_values), 0)
    pairs = pc.list_flatten(key_values)
    keys = pc.struct_field(pairs, "key")
    if drop:
        kept = pc.invert(pc.fill_null(pc.is_in(keys, value_set=pa.array(drop, pa.string())), False))
        if not pc.all(kept).as_py():
            parents = np.repeat(np.arange(len(lengths)), lengths.to_numpy(zero_copy_only=False))
            mask = kept.to_numpy(zero_copy_only=False)
            lengths = pa.array(np.bincount(parents[mask], minlength=len(lengths)), pa.int64())
            pairs, keys = pairs.filter(kept), keys.filter(kept)
    offsets = pa.concat_arrays(
        [pa.array([0], pa.int32()), pc.cast(pc.cumulative_sum(lengths), pa.int32())]
    )
    for alias, key in (aliases or {}).items():
        keys = pc.if_else(pc.equal(keys, alias), pa.scalar(key, pa.string()), keys)
    value = pc.struct_field(pairs, "value")
    text = pc.coalesce(
        pc.struct_field(value, "string_value"),
        pc.cast(pc.struct_field(value, "int_value"), pa.string()),
        pc.cast(pc.struct_field(value, "double_value"), pa.string()),
        pc.cast(pc.struct_field(value, "bool_value"), pa.string()),
    )
    for key, (pattern, replacement) in (values or {}).items():
        rewritten = pc.replace_substring_regex(text, pattern=pattern, replacement=replacement)
        text = pc.if_else(pc.equal(keys, key), rewritten, text)
    return pa.MapArray.from_arrays(offsets, keys, text, type=_STRING_MAP)

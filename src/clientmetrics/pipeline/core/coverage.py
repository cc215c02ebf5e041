"""Which of KIP-714's standard metrics each client software sends, and which it lacks.

KIP-714 lists standard producer and consumer metrics that every supporting client
should send where they make sense (``telemetry.standard``). What a client software
actually sends is only seen in its pushes: this rule reads decoded points (one row
per data point, with the push's labels) and, for each client software name and
version, counts its instances, finds the roles they played (producer, consumer:
any metric under ``org.apache.kafka.producer.`` or ``.consumer.``), and splits the
standard metrics of those roles into the ones seen and the ones never seen.

A metric counts as sent once any instance of that software version sent it in any
push; a client that skips zero values (franz-go does) shows a metric only once it
has a value. A role no instance played is not held against the software.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.telemetry.standard import STANDARD_BY_ROLE, STANDARD_METRICS

__all__ = ["COVERAGE_INPUT", "SOFTWARE_ARROW", "software_coverage", "standard_lists"]

_KEYS = ["client_software_name", "client_software_version"]
#: The columns ``software_coverage`` reads (decoded points have them all).
COVERAGE_INPUT = ("client_instance_id", *_KEYS, "metric_name")

_NAMES = pa.list_(pa.string())
#: One row per client software name and version.
SOFTWARE_ARROW = pa.schema(
    [
        ("client_software_name", pa.string()),
        ("client_software_version", pa.string()),
        #: Distinct client instances seen with this software.
        ("instances", pa.int64()),
        #: ``producer`` and/or ``consumer``: the roles its instances played.
        ("roles", _NAMES),
        #: The standard metrics of those roles it sent, and those it never sent (sorted).
        ("standard_sent", _NAMES),
        ("standard_missing", _NAMES),
        #: sent / (sent + missing); null when it played no role.
        ("coverage", pa.float64()),
    ]
)


def _roles(names: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    out = pa.nulls(len(names), pa.string())
    for role in STANDARD_BY_ROLE:
        hit = pc.fill_null(pc.starts_with(names, f"org.apache.kafka.{role}."), False)
        out = pc.if_else(hit, role, out)
    return out


def _by_software(table: pa.Table, column: str, how: str) -> dict[tuple[str, str], object]:
    grouped = table.group_by(_KEYS, use_threads=False).aggregate([(column, how)])
    rows = grouped.to_pylist()
    return {(r[_KEYS[0]], r[_KEYS[1]]): r[f"{column}_{how}"] for r in rows}


def software_coverage(points: pa.Table) -> pa.Table:
    """The ``SOFTWARE_ARROW`` table of ``points`` (``COVERAGE_INPUT`` columns at least).

    Grouping is done in Arrow over every point; only the per-software result
    (a handful of rows) is assembled in Python.
    """
    points = points.select(list(COVERAGE_INPUT))
    names = points.column("metric_name")
    instances = _by_software(points, "client_instance_id", "count_distinct")
    roles = points.select(_KEYS).append_column("role", _roles(names))
    played = _by_software(roles.filter(pc.is_valid(roles.column("role"))), "role", "distinct")
    standard = pc.is_in(names, value_set=pa.array(sorted(STANDARD_METRICS), pa.string()))
    sent = _by_software(points.filter(pc.fill_null(standard, False)), "metric_name", "distinct")
    rows = []
    for key in sorted(instances, key=lambda k: (k[0] or "", k[1] or "")):
        their_roles = sorted(played.get(key) or [])  # type: ignore[call-overload]
        wanted = frozenset().union(*(STANDARD_BY_ROLE[r] for r in their_roles))
        seen = sorted(set(sent.get(key) or []) & wanted)  # type: ignore[call-overload]
        missing = sorted(wanted - set(seen))
        rows.append(
            {
                "client_software_name": key[0],
                "client_software_version": key[1],
                "instances": instances[key],
                "roles": their_roles,
                "standard_sent": seen,
                "standard_missing": missing,
                "coverage": len(seen) / len(wanted) if wanted else None,
            }
        )
    return pa.Table.from_pylist(rows, schema=SOFTWARE_ARROW)


def standard_lists(
    group: np.ndarray, names: pa.Array | pa.ChunkedArray, groups: int
) -> pa.ListArray:
    """Per group ``0..groups-1``: the standard metrics among ``names`` (sorted, each once).

    ``group[i]`` is the group of ``names[i]`` (negative: none). What the inventory
    keeps per instance (``standard_metrics``), and how it merges across batches.
    """
    standard = pc.fill_null(
        pc.is_in(names, value_set=pa.array(sorted(STANDARD_METRICS), pa.string())), False
    )
    keep = np.asarray(standard.to_numpy(zero_copy_only=False), dtype=bool) & (group >= 0)
    rows = pa.table({"g": pa.array(group[keep], pa.int64()), "n": pc.filter(names, keep)})
    rows = rows.take(pc.sort_indices(rows, [("g", "ascending"), ("n", "ascending")]))
    g = rows.column("g").to_numpy()
    n = rows.column("n")
    first = np.ones(len(g), dtype=bool)
    if len(g) > 1:
        same_name = pc.fill_null(pc.equal(n[1:], n[:-1]), False)
        same = (g[1:] == g[:-1]) & np.asarray(same_name.to_numpy(zero_copy_only=False), bool)
        first[1:] = ~same
    g, n = g[first], pc.filter(n, first)
    counts = np.bincount(g, minlength=groups) if len(g) else np.zeros(groups, np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    values = n.combine_chunks() if isinstance(n, pa.ChunkedArray) else n
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values.cast(pa.string()))

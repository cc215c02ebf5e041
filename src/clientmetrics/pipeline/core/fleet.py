"""The fleet: every client, pushing or not, from connection records joined with pushes.

A fleet row is one client as an operator names it: principal, ``client_id``,
software name and version, source address and listener. Its connection records
(``telemetry.connections``) are aggregated first, in Arrow (a day of records is
many rows; its distinct clients are few), then joined with the clients table
(one row per pushing instance) on the instance ids the records carry. Each row
gets a **coverage** state:

- ``pushes``: an instance of it pushed (or the clients table alone knows it:
  a deployment with only the broker plugin sees only pushing clients);
- ``cannot``: its software has no KIP-714 (``data/telemetry_support.toml``), is
  older than the version that brought it, or sent no software name at all;
- ``does_not``: it could but did not; ``reason`` says why it likely did not:
  ``no_subscription`` (it asked for its subscription: none matched it) or
  ``telemetry_off`` (it never asked: ``enable.metrics.push=false`` or alike).

Software rows are flagged from the same known-defects table as the findings.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.core.defects import defects_for, version_key
from clientmetrics.telemetry.connections import (
    CONNECTION_ARROW,
    conform_connections,
    landed_connections,
)
from clientmetrics.telemetry.model import UNKNOWN

__all__ = [
    "CONNECTION_ARROW",
    "FLEET_ARROW",
    "Support",
    "conform_connections",
    "fleet_table",
    "landed_connections",
    "support_for",
    "telemetry_support",
]


#: What names a client in the fleet (a connection record's columns; the clients table's too).
FLEET_KEY = (
    "principal",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
)

FLEET_ARROW = pa.schema(
    [
        *((name, pa.string()) for name in FLEET_KEY),
        ("listeners", pa.list_(pa.string())),
        #: The client instance ids seen for it (sorted; empty when it told none).
        ("instances", pa.list_(pa.string())),
        ("first_seen_ms", pa.int64()),
        ("last_seen_ms", pa.int64()),
        #: Connections counted in its records (0: known from pushes only).
        ("connections", pa.int64()),
        ("pushes", pa.int64()),
        #: ``pushes``, ``cannot`` or ``does_not``.
        ("coverage", pa.string()),
        ("reason", pa.string()),
        #: Known defects of its software version (``data/known_defects.toml`` ids).
        ("defects", pa.list_(pa.string())),
    ]
)


@dataclass(frozen=True, slots=True)
class Support:
    """One row of the telemetry-support table."""

    name: str
    telemetry: bool
    min: tuple[int, ...] | None
    reason: str
    source: str


def parse_support(document: dict[str, Any]) -> dict[str, Support]:
    """Validate a telemetry-support document: every row needs a reason and a source URL."""
    rows = document.get("software")
    if set(document) != {"software"} or not isinstance(rows, list):
        raise ConfigurationError("a telemetry-support table has one top-level array, [[software]]")
    out: dict[str, Support] = {}
    for index, row in enumerate(rows):
        required = {"name", "telemetry", "reason", "source"}
        if not isinstance(row, dict) or not required <= set(row) or set(row) - {*required, "min"}:
            raise ConfigurationError(f"software #{index} needs name, telemetry, reason, source")
        low = version_key(str(row["min"])) if "min" in row else None
        if "min" in row and low is None:
            raise ConfigurationError(f"software {row['name']!r}: bad min version")
        if not str(row["source"]).startswith(("https://", "http://")):
            raise ConfigurationError(f"software {row['name']!r} needs a source URL")
        if row["name"] in out or not isinstance(row["telemetry"], bool):
            raise ConfigurationError(f"software {row['name']!r}: listed twice or bad telemetry")
        out[str(row["name"])] = Support(
            str(row["name"]), row["telemetry"], low, str(row["reason"]), str(row["source"])
        )
    return out


@cache
def telemetry_support() -> dict[str, Support]:
    """The table that ships with the product."""
    data = resources.files(__package__).joinpath("data/telemetry_support.toml")
    return parse_support(tomllib.loads(data.read_text("utf-8")))


def support_for(name: str, version: str) -> tuple[bool | None, str]:
    """Whether this software version can push (None: not known) and why not."""
    if name in ("", UNKNOWN):
        return False, "sends no software name (ApiVersions before v3): no KIP-714 client does"
    row = telemetry_support().get(name)
    if row is None:
        return None, ""
    if not row.telemetry:
        return False, row.reason
    key = version_key(version)
    if row.min is not None and key is not None and key < row.min:
        return False, f"older than the first version with KIP-714 ({'.'.join(map(str, row.min))})"
    return True, ""


def _connection_groups(connections: pa.Table) -> list[dict[str, Any]]:
    if connections.num_rows == 0:
        return []
    grouped = connections.group_by(list(FLEET_KEY), use_threads=False).aggregate(
        [
            ("listener", "distinct"),
            ("client_instance_id", "distinct"),
            ("first_seen_ms", "min"),
            ("last_seen_ms", "max"),
            ("connections", "sum"),
            ("telemetry_requested", "any"),
        ]
    )
    return _fold_unnamed(grouped.to_pylist())


def _fold_unnamed(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fold a client's connections seen before its ApiVersions (software ``unknown``)
    into its row that names its software, when exactly one does: a connection caught
    mid-handshake says nothing about what the client runs."""
    named: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for group in groups:
        if group["client_software_name"] not in ("", UNKNOWN):
            named.setdefault(_who(group), []).append(group)
    out = []
    for group in groups:
        into = named.get(_who(group), [])
        if group["client_software_name"] not in ("", UNKNOWN) or len(into) != 1:
            out.append(group)
            continue
        target = into[0]
        for name in ("listener_distinct", "client_instance_id_distinct"):
            target[name] = sorted({*target[name], *group[name]})
        target["first_seen_ms_min"] = min(target["first_seen_ms_min"], group["first_seen_ms_min"])
        target["last_seen_ms_max"] = max(target["last_seen_ms_max"], group["last_seen_ms_max"])
        target["connections_sum"] += group["connections_sum"]
        target["telemetry_requested_any"] |= group["telemetry_requested_any"]
    return out


def _who(group: dict[str, Any]) -> tuple[Any, ...]:
    return (group["principal"], group["client_id"], group["client_source_address"])


def _pushing(clients: pa.Table) -> dict[str, dict[str, Any]]:
    """Instance id -> its clients row (timestamps as epoch ms)."""
    if clients.num_rows == 0:
        return {}
    table = clients.select([*FLEET_KEY, "client_instance_id", "first_seen", "last_seen", "pushes"])
    for name in ("first_seen", "last_seen"):
        column = table.column(name)  # any unit, aware or naive (Spark's naive UTC)
        ms = pc.cast(pc.cast(column, pa.timestamp("ms", column.type.tz)), pa.int64())
        table = table.set_column(table.schema.get_field_index(name), name, ms)
    return {row["client_instance_id"]: row for row in table.to_pylist()}


def fleet_table(connections: pa.Table, clients: pa.Table) -> pa.Table:
    """Every client (``FLEET_ARROW``) from connection records and the clients table."""
    pushing = _pushing(clients)
    rows: list[dict[str, Any]] = []
    claimed: set[str] = set()
    for group in _connection_groups(connections):
        instances = sorted(i for i in group["client_instance_id_distinct"] if i)
        claimed.update(instances)
        pushes = sum(int(pushing[i]["pushes"] or 0) for i in instances if i in pushing)
        row = {name: group[name] for name in FLEET_KEY}
        row |= {
            "listeners": sorted(group["listener_distinct"]),
            "instances": instances,
            "first_seen_ms": group["first_seen_ms_min"],
            "last_seen_ms": group["last_seen_ms_max"],
            "connections": group["connections_sum"],
            "pushes": pushes,
        }
        rows.append(row | _coverage(row, pushes, bool(group["telemetry_requested_any"])))
    for instance, client in pushing.items():
        if instance in claimed:
            continue
        row = {name: client[name] or UNKNOWN for name in FLEET_KEY}
        row |= {
            "listeners": [],
            "instances": [instance],
            "first_seen_ms": client["first_seen"],
            "last_seen_ms": client["last_seen"],
            "connections": 0,
            "pushes": int(client["pushes"] or 0),
        }
        rows.append(row | _coverage(row, row["pushes"], True))
    rows.sort(key=lambda r: tuple(r[name] or "" for name in FLEET_KEY))
    return pa.Table.from_pylist(rows, schema=FLEET_ARROW)


def _coverage(row: dict[str, Any], pushes: int, requested: bool) -> dict[str, Any]:
    name, version = row["client_software_name"], row["client_software_version"]
    defects = [defect.id for defect in defects_for(name, version)]
    if pushes > 0:
        return {"coverage": "pushes", "reason": "", "defects": defects}
    capable, why = support_for(name, version)
    if capable is False:
        return {"coverage": "cannot", "reason": why, "defects": defects}
    reason = "no_subscription" if requested else "telemetry_off"
    return {"coverage": "does_not", "reason": reason, "defects": defects}

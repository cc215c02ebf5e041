"""Finding clients by what their owner knows: client id, principal, address, software, group.

The source is the gateway's landing zone (every acknowledged push of the last
hour, read by ``LandingTail``): fresher than the pipeline's tables, which only
know a client once a window closed. ``silent`` is the pipeline's rule
(``pipeline.core.clients``), judged at the wall clock; the subscriptions a
client matches are found by the gateway's matcher over the subscriptions the
cluster lists.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.admin import AsyncAdmin
from clientmetrics.investigate.live import context_of
from clientmetrics.pipeline.core.clients import silent
from clientmetrics.pipeline.core.decode import decode_pushes
from clientmetrics.telemetry.matching import PatternCache
from clientmetrics.telemetry.model import Subscription

__all__ = ["ClientHit", "Query", "Subscriptions", "cluster_subscriptions", "find_clients"]

#: Resource attribute names a consumer's group comes under (librdkafka, the Java client).
GROUP_KEYS = ("group.id", "group_id")


@dataclass(frozen=True, slots=True)
class Query:
    """What the owner knows; every given field must match (AND). Patterns are regular
    expressions matched whole; ``client_id`` is exact."""

    client_id: str | None = None
    client_id_pattern: str | None = None
    principal: str | None = None
    source_address: str | None = None
    software_name: str | None = None
    software_version: str | None = None
    group: str | None = None

    def row_ok(self, row: Mapping[str, object]) -> bool:
        """Whether a client's labels satisfy the query (the group is checked apart)."""
        checks = (
            ("client_id", self.client_id, False),
            ("client_id", self.client_id_pattern, True),
            ("principal", self.principal, False),
            ("client_source_address", self.source_address, False),
            ("client_software_name", self.software_name, False),
            ("client_software_version", self.software_version, False),
        )
        for column, wanted, pattern in checks:
            if wanted is None:
                continue
            value = str(row[column])
            if pattern and re.fullmatch(wanted, value) is None:
                return False
            if not pattern and value != wanted:
                return False
        return True


@dataclass(frozen=True, slots=True)
class ClientHit:
    """One client instance found, with what an operator needs to act on it."""

    client_instance_id: str
    client_id: str
    software: str
    principal: str
    source_addresses: tuple[str, ...]
    group: str | None
    last_push_ms: int
    #: None in the broker plugin's records (a broker does not tell a plugin either).
    push_interval_ms: int | None
    subscription_id: int | None
    state: str
    """``pushing``, ``silent`` (no push for 3 intervals) or ``gone`` (said goodbye)."""
    metric_types: tuple[str, ...]
    """Client types its metrics are of (``consumer``, ``producer``), from metric names."""
    #: Metric names in its latest push: what tells one subscription's pushes from
    #: another's where records carry no subscription id (the broker plugin's).
    last_push_metrics: int = 0
    subscriptions: tuple[str, ...] = field(default=())


def find_clients(
    rows: pa.Table,
    query: Query,
    *,
    now_ms: int,
    subscriptions: Iterable[Subscription] = (),
) -> list[ClientHit]:
    """The clients of landing ``rows`` that satisfy ``query``, newest push first."""
    if rows.num_rows == 0:
        return []
    ordered = rows.sort_by([("received_at", "ascending")])
    latest: dict[str, dict[str, object]] = {}
    addresses: dict[str, set[str]] = {}
    for row in ordered.drop_columns(["payload"]).to_pylist():
        instance = str(row["client_instance_id"])
        latest[instance] = row
        addresses.setdefault(instance, set()).add(str(row["client_source_address"]))
    chosen = {i: r for i, r in latest.items() if query.row_ok(r)}
    groups, types, last_names = _from_payloads(ordered, set(chosen))
    if query.group is not None:
        chosen = {i: r for i, r in chosen.items() if groups.get(i) == query.group}
    compiled = [PatternCache().compile_subscription(s) for s in subscriptions]
    hits = []
    for instance, row in chosen.items():
        ctx = context_of(row)
        matched = tuple(
            c.subscription.name for c in compiled if c.matches(uuid.UUID(instance), ctx)
        )
        last_ms = int(row["received_at"].timestamp() * 1000)  # type: ignore[attr-defined]
        hits.append(
            ClientHit(
                client_instance_id=instance,
                client_id=str(row["client_id"]),
                software=f"{row['client_software_name']} {row['client_software_version']}",
                principal=str(row["principal"]),
                source_addresses=tuple(sorted(addresses[instance])),
                group=groups.get(instance),
                last_push_ms=last_ms,
                push_interval_ms=_int_or_none(row["push_interval_ms"]),
                subscription_id=_int_or_none(row["subscription_id"]),
                state=_state(row, now_ms),
                metric_types=tuple(sorted(types.get(instance, ()))),
                last_push_metrics=len(last_names.get(instance, ())),
                subscriptions=matched,
            )
        )
    return sorted(hits, key=lambda h: (-h.last_push_ms, h.client_instance_id))


def _int_or_none(value: object) -> int | None:
    return None if value is None else int(str(value))


def _state(row: Mapping[str, object], now_ms: int) -> str:
    if row["terminating"]:
        return "gone"
    quiet = silent(
        pa.array([row["received_at"]], pa.timestamp("us", tz="UTC")),
        pa.array([row["push_interval_ms"]], pa.int32()),
        pa.array([False]),
        now_ms * 1000,
    )
    return "silent" if quiet[0].as_py() else "pushing"


def _from_payloads(
    rows: pa.Table, instances: set[str]
) -> tuple[dict[str, str], dict[str, set[str]], dict[str, set[str]]]:
    """Per instance, its group (a resource attribute), its metrics' client types and the
    metric names of its latest push (``rows`` oldest first)."""
    if not instances:
        return {}, {}, {}
    mine = rows.filter(pc.is_in(rows.column("client_instance_id"), pa.array(sorted(instances))))
    points = decode_pushes(mine).select(
        ["client_instance_id", "received_at", "metric_name", "resource_attributes"]
    )
    groups: dict[str, str] = {}
    types: dict[str, set[str]] = {}
    latest: dict[str, tuple[object, set[str]]] = {}
    for point in points.to_pylist():
        instance = point["client_instance_id"]
        at, names = latest.get(instance, (None, set()))
        if at != point["received_at"]:  # a later push: the names start again
            at, names = point["received_at"], set()
            latest[instance] = (at, names)
        names.add(str(point["metric_name"]))
        for key, value in point["resource_attributes"] or []:
            if key in GROUP_KEYS and value:
                groups[instance] = value
        parts = str(point["metric_name"]).split(".")
        if parts[:3] == ["org", "apache", "kafka"] and len(parts) > 3:
            types.setdefault(instance, set()).add(parts[3])
    return groups, types, {instance: names for instance, (_, names) in latest.items()}


def subscriptions_from(configs: Mapping[str, Mapping[str, str | None]]) -> Sequence[Subscription]:
    """Subscriptions from ``{name: configs}`` as the cluster describes them (bad ones skipped)."""
    from clientmetrics.telemetry.configs import ConfigError, validate

    found = []
    for name, values in configs.items():
        try:
            sub = validate(name, {k: v for k, v in values.items() if v is not None})
        except ConfigError:
            continue
        if sub is not None:
            found.append(sub)
    return found


#: Subscriptions as ``find_clients`` matches hits against them.
Subscriptions = list[Subscription]


async def cluster_subscriptions(admin: AsyncAdmin) -> Subscriptions:
    """The subscriptions the cluster (or gateway) describes: what each hit is matched against."""
    described = await admin.describe_all()
    return list(subscriptions_from({r.name: r.as_dict() for r in described}))

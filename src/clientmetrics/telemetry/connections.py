"""Connection records: every client a gateway serves, pushing or not.

A gateway sees each client connection's software (ApiVersions v3+), ``client.id``
(request headers), principal, listener, source address and, where known, its
instance id (KIP-1313's header v3, or the instance that pushed on it). Whatever
the connection churn, what it writes stays bounded: connections are aggregated
per **client key** (everything above but the source port) over an interval, in a
table of at most ``max_keys`` keys; a connection whose key is new when the table
is full is counted in ``dropped`` and not recorded. One interval's drain is at
most ``max_keys`` records, so the records' rate is bounded by ``max_keys`` per
interval however many connections come and go.

No I/O and no clock: times are epoch milliseconds passed in. The record's fields
are the one definition the landing files' columns (``CONNECTION_ARROW``) and the
topic records' headers derive from (docs/record-format.md, "Connection records").
"""

from __future__ import annotations

import json
import uuid
from dataclasses import astuple, dataclass, fields
from pathlib import Path

import pyarrow as pa

from clientmetrics.telemetry.push_arrow import LANDING_DIR
from clientmetrics.wire.record_batches import BATCH_HEADER_BYTES

__all__ = [
    "BATCH_HEADER_BYTES",
    "CONNECTIONS_DIR",
    "CONNECTION_ARROW",
    "NO_USAGE",
    "RECORD_KIND_HEADER",
    "ClientKey",
    "ConnectionRecord",
    "ConnectionTable",
    "Usage",
    "landed_connections",
    "record_from_json",
    "record_json",
    "record_key",
    "records_to_arrow",
]

#: The landing zone's directory of connection records (beside ``pushes``).
CONNECTIONS_DIR = "connections"


def landed_connections(data_dir: Path) -> Path:
    """Where gateways land connection records (``DATA/landing/connections``)."""
    return data_dir / LANDING_DIR / CONNECTIONS_DIR


@dataclass(frozen=True, slots=True)
class ClientKey:
    """What identifies one client to the fleet view: one row per key and interval."""

    principal: str
    client_id: str
    client_software_name: str
    client_software_version: str
    listener: str
    security_protocol: str
    client_source_address: str
    #: Canonical UUID text, or "" while the client has told none.
    client_instance_id: str = ""
    #: The client asked for its telemetry subscription (GetTelemetrySubscriptions)
    #: on this connection: it has KIP-714 turned on.
    telemetry_requested: bool = False


@dataclass(frozen=True, slots=True)
class ConnectionRecord:
    """One client key's connections over one interval (one landed row, one topic record)."""

    node_id: int
    interval_start_ms: int
    interval_end_ms: int
    principal: str
    client_id: str
    client_software_name: str
    client_software_version: str
    listener: str
    security_protocol: str
    client_source_address: str
    client_instance_id: str
    telemetry_requested: bool
    #: When a connection of this key was first and last seen in the interval.
    first_seen_ms: int
    last_seen_ms: int
    #: Connections of this key observed in the interval (open ones count once per interval).
    connections: int
    #: Proxy mode: records and record-batch bytes its Produce requests carried in the
    #: interval, and its Fetch responses (read off the batch headers of what was relayed).
    #: Batches too: the bytes less 61 per batch are the records' own bytes.
    produced_records: int = 0
    produced_bytes: int = 0
    produced_batches: int = 0
    consumed_records: int = 0
    consumed_bytes: int = 0
    consumed_batches: int = 0


#: A connection's usage: records, bytes and batches produced, then consumed.
Usage = tuple[int, int, int, int, int, int]
NO_USAGE: Usage = (0, 0, 0, 0, 0, 0)


_KEY_FIELDS = tuple(f.name for f in fields(ClientKey))
_RECORD_FIELDS = tuple(f.name for f in fields(ConnectionRecord))
_INT64 = {
    "interval_start_ms",
    "interval_end_ms",
    "first_seen_ms",
    "last_seen_ms",
    "connections",
    "produced_records",
    "produced_bytes",
    "produced_batches",
    "consumed_records",
    "consumed_bytes",
    "consumed_batches",
}


def _arrow_type(name: str) -> pa.DataType:
    if name == "telemetry_requested":
        return pa.bool_()
    if name == "node_id":
        return pa.int32()
    if name in _INT64:
        return pa.int64()
    return pa.string()


#: What a column missing from an older landed file reads as, by Arrow type (else "").
_DEFAULTS: dict[int, object] = {pa.int64().id: 0, pa.int32().id: 0, pa.bool_().id: False}

#: The landed columns of connection records, in the record's field order.
CONNECTION_ARROW = pa.schema(
    [pa.field(name, _arrow_type(name), nullable=False) for name in _RECORD_FIELDS]
)


def conform_connections(table: pa.Table | None) -> pa.Table:
    """Landed records as ``CONNECTION_ARROW``, whichever version landed them.

    Files landed before a column existed (the consumed and batch counts came later)
    lack it: it reads as 0 (or "" / False), as those gateways counted nothing there.
    """
    if table is None:
        return CONNECTION_ARROW.empty_table()
    columns = []
    for field in CONNECTION_ARROW:
        default = pa.scalar(_DEFAULTS.get(field.type.id, ""), type=field.type)
        if field.name in table.column_names:
            column = table.column(field.name).cast(field.type).fill_null(default)
        else:
            column = pa.array([default.as_py()] * table.num_rows, type=field.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=CONNECTION_ARROW)


def records_to_arrow(records: list[ConnectionRecord]) -> pa.Table:
    """The records as one Arrow table of ``CONNECTION_ARROW``."""
    columns = list(zip(*(astuple(r) for r in records), strict=True)) if records else []
    arrays = [
        pa.array(columns[i] if columns else [], type=field.type)
        for i, field in enumerate(CONNECTION_ARROW)
    ]
    return pa.Table.from_arrays(arrays, schema=CONNECTION_ARROW)


class _Seen:
    __slots__ = ("connections", "first", "last", "usage")

    def __init__(self, now_ms: int) -> None:
        self.first = now_ms
        self.last = now_ms
        self.connections = 0
        self.usage = [0] * len(NO_USAGE)


class ConnectionTable:
    """Connections aggregated per client key over an interval, at most ``max_keys`` keys."""

    __slots__ = ("_keys", "_max", "_node_id", "_start", "dropped", "observed")

    def __init__(self, max_keys: int, node_id: int, now_ms: int) -> None:
        if max_keys < 1:
            raise ValueError(f"max_keys must be at least 1, not {max_keys}")
        self._max = max_keys
        self._node_id = node_id
        self._start = now_ms
        self._keys: dict[ClientKey, _Seen] = {}
        #: Connections not recorded because their key was new to a full table (ever).
        self.dropped = 0
        #: Connections observed (ever).
        self.observed = 0

    def __len__(self) -> int:
        return len(self._keys)

    def observe(
        self,
        key: ClientKey,
        now_ms: int,
        *,
        since_ms: int | None = None,
        usage: Usage = NO_USAGE,
    ) -> bool:
        """Count one connection of ``key`` seen at ``now_ms`` (open since ``since_ms``).

        False when the table is full and ``key`` is new: the connection is dropped
        and counted. A dict lookup and three stores: cheap enough on the event loop
        for every closing connection of a storm.
        """
        self.observed += 1
        seen = self._keys.get(key)
        if seen is None:
            if len(self._keys) >= self._max:
                self.dropped += 1
                return False
            seen = self._keys[key] = _Seen(now_ms)
        first = now_ms if since_ms is None else max(since_ms, self._start)
        seen.first = min(seen.first, first)
        seen.last = max(seen.last, now_ms)
        seen.connections += 1
        total = seen.usage
        for i, used in enumerate(usage):
            total[i] += used
        return True

    def drain(self, now_ms: int) -> list[ConnectionRecord]:
        """The interval's records (at most ``max_keys``); the next interval starts empty."""
        start, self._start = self._start, now_ms
        keys, self._keys = self._keys, {}
        return [
            ConnectionRecord(
                self._node_id,
                start,
                now_ms,
                key.principal,
                key.client_id,
                key.client_software_name,
                key.client_software_version,
                key.listener,
                key.security_protocol,
                key.client_source_address,
                key.client_instance_id,
                key.telemetry_requested,
                seen.first,
                seen.last,
                seen.connections,
                *seen.usage,
            )
            for key, seen in keys.items()
        ]


#: The header naming a connection record on a topic (its value is the format's version).
RECORD_KIND_HEADER = ("record_kind", b"connection/1")
#: Integer fields' ranges: times and counts are never negative.
_INT_RANGE = {"node_id": (-(2**31), 2**31 - 1)}
_COUNT_RANGE = (0, 2**63 - 1)


def record_json(record: ConnectionRecord) -> bytes:
    """A record as a topic record's value: a JSON object of the landed columns."""
    return json.dumps(dict(zip(_RECORD_FIELDS, astuple(record), strict=True))).encode()


def record_key(record: ConnectionRecord) -> bytes:
    """A topic record's key: the instance id when known, else the ``client_id`` (one
    client's records stay on one partition, in order)."""
    return (record.client_instance_id or record.client_id).encode()


def record_from_json(value: bytes) -> ConnectionRecord | None:
    """A topic record's value read back; None when it is not a connection record
    (not JSON, a field missing, extra or of the wrong type, an integer out of range)."""
    try:
        document = json.loads(value)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or set(document) != set(_RECORD_FIELDS):
        return None
    for name in _RECORD_FIELDS:
        got = document[name]
        kind = _arrow_type(name)
        if kind == pa.bool_():
            ok = isinstance(got, bool)
        elif kind == pa.string():
            ok = isinstance(got, str)
        else:
            low, high = _INT_RANGE.get(name, _COUNT_RANGE)
            ok = isinstance(got, int) and not isinstance(got, bool) and low <= got <= high
        if not ok:
            return None
    return ConnectionRecord(*(document[name] for name in _RECORD_FIELDS))


def instance_text(value: uuid.UUID | None) -> str:
    """A record's instance id: canonical UUID text, "" when none is known."""
    return "" if value is None else str(value)


if _RECORD_FIELDS[3 : 3 + len(_KEY_FIELDS)] != _KEY_FIELDS:
    raise TypeError("ConnectionRecord must carry ClientKey's fields, in order, after its interval")

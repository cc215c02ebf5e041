"""Plain data shared by the telemetry core, the gateway, the exporters and the store.

Nothing here does I/O or reads a clock: times are epoch milliseconds passed in.
"""

from __future__ import annotations

import base64
import enum
import typing
import uuid
from dataclasses import dataclass, fields
from typing import Annotated

from clientmetrics.wire.codec import ZERO_UUID

ONE_UUID = uuid.UUID(int=1)
RESERVED_UUIDS = frozenset({ZERO_UUID, ONE_UUID})

#: The six ``match`` selectors of KIP-714.
SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)

#: Kafka's ``ClientInformation.UNKNOWN_NAME_OR_VERSION``.
UNKNOWN = "unknown"


def kafka_uuid_text(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: base64url of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, slots=True)
class Subscription:
    """One client-metrics subscription (a CLIENT_METRICS config resource), validated."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    #: (selector, pattern) pairs; every pair must match (AND); empty matches all.
    match: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class ClientContext:
    """What the gateway knows about the connection a telemetry request came on."""

    connection_id: int
    client_id: str
    client_software_name: str
    client_software_version: str
    client_source_address: str
    client_source_port: int
    principal: str
    node_id: int
    #: The listener the client connected on, and its security protocol.
    listener: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"


class Kind(enum.Enum):
    """How a field of an accepted push is stored: WAL record, Arrow column, header."""

    TIMESTAMP_MS = "timestamp_ms"
    UUID = "uuid"
    BOOL = "bool"
    INT8 = "int8"
    INT32 = "int32"
    TEXT = "text"
    BYTES = "bytes"


@dataclass(frozen=True, slots=True)
class Col:
    """Annotation of one ``AcceptedPush`` field: its kind, column name and role."""

    kind: Kind
    #: The landing column's name when it differs from the field's.
    column: str | None = None
    #: A label the broker adds (KIP-714's names): copied from the ``ClientContext``
    #: field of the same name when the push is accepted, and offered to exporters.
    label: bool = False


@dataclass(frozen=True, slots=True)
class AcceptedPush:
    """A push the manager accepted, ready for the exporters (one landing row).

    This is the one definition of an accepted push: the WAL record, the landing
    columns (Arrow and Spark), the exporters' labels and the manager's copy from
    the connection are all derived from these fields (``PUSH_FIELDS``), so a new
    label is one line here (plus the ``ClientContext`` field it is copied from).
    It also carries everything KIP-1217's ``exportMetrics(context, payload)``
    passes: the payload, the push interval and the authenticated principal.
    """

    received_at_ms: Annotated[int, Col(Kind.TIMESTAMP_MS, column="received_at")]
    client_instance_id: Annotated[uuid.UUID, Col(Kind.UUID, label=True)]
    subscription_id: Annotated[int, Col(Kind.INT32)]
    terminating: Annotated[bool, Col(Kind.BOOL)]
    client_id: Annotated[str, Col(Kind.TEXT, label=True)]
    client_software_name: Annotated[str, Col(Kind.TEXT, label=True)]
    client_software_version: Annotated[str, Col(Kind.TEXT, label=True)]
    client_source_address: Annotated[str, Col(Kind.TEXT, label=True)]
    client_source_port: Annotated[int, Col(Kind.INT32, label=True)]
    principal: Annotated[str, Col(Kind.TEXT, label=True)]
    node_id: Annotated[int, Col(Kind.INT32, label=True)]
    #: The gateway listener the push came on (``SASL_SSL``...) and its security protocol.
    listener: Annotated[str, Col(Kind.TEXT, label=True)]
    security_protocol: Annotated[str, Col(Kind.TEXT, label=True)]
    compression_type: Annotated[int, Col(Kind.INT8)]
    push_interval_ms: Annotated[int, Col(Kind.INT32)]
    #: The decompressed OTLP ``MetricsData`` (may be empty). Always the last field.
    payload: Annotated[bytes, Col(Kind.BYTES)]

    def label_values(self, names: typing.Iterable[str]) -> list[tuple[str, str | int]]:
        """``(name, value)`` of the broker labels ``names``, as KIP-714 spells them."""
        out: list[tuple[str, str | int]] = []
        for name in names:
            value = getattr(self, name)
            out.append((name, str(value) if isinstance(value, uuid.UUID) else value))
        return out


@dataclass(frozen=True, slots=True)
class PushField:
    """One field of ``AcceptedPush`` as the derived formats see it."""

    name: str
    column: str
    kind: Kind
    label: bool


def _push_fields() -> tuple[PushField, ...]:
    hints = typing.get_type_hints(AcceptedPush, include_extras=True)
    out = []
    for f in fields(AcceptedPush):
        (col,) = [m for m in typing.get_args(hints[f.name])[1:] if isinstance(m, Col)]
        out.append(PushField(f.name, col.column or f.name, col.kind, col.label))
    if out[-1].kind is not Kind.BYTES:
        raise TypeError("AcceptedPush must end with its payload")
    return tuple(out)


#: Every field of an accepted push, in order: the landing contract's columns.
PUSH_FIELDS = _push_fields()
#: The labels the broker adds to a push (KIP-714's names), in field order.
PUSH_LABELS = tuple(f.name for f in PUSH_FIELDS if f.label)
#: Labels copied from the connection's ``ClientContext`` (all but the instance id).
CONTEXT_LABELS = tuple(name for name in PUSH_LABELS if name != "client_instance_id")

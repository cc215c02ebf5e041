"""Plain data shared by the telemetry core, the gateway, the exporters and the store.

Nothing here does I/O or reads a clock: times are epoch milliseconds passed in.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass

ZERO_UUID = uuid.UUID(int=0)
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


@dataclass(frozen=True, slots=True)
class AcceptedPush:
    """A push the manager accepted, ready for the exporters (one landing row)."""

    received_at_ms: int
    client_instance_id: uuid.UUID
    subscription_id: int
    terminating: bool
    client_id: str
    client_software_name: str
    client_software_version: str
    client_source_address: str
    client_source_port: int
    principal: str
    node_id: int
    compression_type: int
    push_interval_ms: int
    #: The decompressed OTLP ``MetricsData`` (may be empty).
    payload: bytes

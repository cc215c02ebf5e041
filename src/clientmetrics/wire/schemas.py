"""Which Kafka messages the codec layer serves, and the entity class of each.

kio 0.6.5 generates one dataclass per message and version; this module is the
only place that knows how kio names and loads them, plus our own KIP-1313
entities that kio lacks.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType

from clientmetrics.wire.api import ApiKey
from clientmetrics.wire.errors import UnsupportedApi
from clientmetrics.wire.kip1313 import (
    GetTelemetrySubscriptionsRequestV1,
    GetTelemetrySubscriptionsResponseV1,
    PushTelemetryRequestV1,
    PushTelemetryResponseV1,
)

__all__ = [
    "SERVED",
    "kio_known_versions",
    "request_type",
    "response_type",
]

SERVED: Mapping[int, tuple[int, int]] = MappingProxyType(
    {
        ApiKey.API_VERSIONS: (0, 4),
        # librdkafka 2.16 sends Metadata v12, kafka-python 3.0.12 less
        ApiKey.METADATA: (0, 12),
        ApiKey.FIND_COORDINATOR: (0, 6),  # proxy address rewriting
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.DESCRIBE_CONFIGS: (1, 4),  # v0 was removed in Kafka 4.0
        ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.DESCRIBE_CLUSTER: (0, 2),  # proxy address rewriting
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 1),  # v1 is KIP-1313
        ApiKey.PUSH_TELEMETRY: (0, 1),  # v1 is KIP-1313
        ApiKey.LIST_CONFIG_RESOURCES: (0, 1),  # KIP-1000 / KIP-1142
        ApiKey.SHARE_FETCH: (1, 2),  # proxy address rewriting (KIP-932; v0 was early access)
        ApiKey.SHARE_ACKNOWLEDGE: (1, 2),  # proxy address rewriting
    }
)
"""api_key -> (min, max) versions that decode/encode works for."""

# Versions kio does not generate: (api_key, version) -> (request, response).
_OWN_ENTITIES: Mapping[tuple[int, int], tuple[type, type]] = MappingProxyType(
    {
        (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 1): (
            GetTelemetrySubscriptionsRequestV1,
            GetTelemetrySubscriptionsResponseV1,
        ),
        (ApiKey.PUSH_TELEMETRY, 1): (PushTelemetryRequestV1, PushTelemetryResponseV1),
    }
)


def kio_known_versions(api_key: int) -> tuple[int, int] | None:
    """(min, max) versions kio has schemas for, ``None`` for keys kio does not know."""
    name = api_key_map.get(api_key)
    if name is None:
        return None
    versions = schema_name_map[name]
    return min(versions), max(versions)


@functools.cache
def _entity_type(api_key: int, api_version: int, kind: EntityType) -> type:
    served = SERVED.get(api_key)
    if served is None or not served[0] <= api_version <= served[1]:
        raise UnsupportedApi(api_key, api_version)
    own = _OWN_ENTITIES.get((api_key, api_version))
    if own is not None:
        return own[0] if kind is EntityType.request else own[1]
    if kind is EntityType.request:
        return load_request_schema(api_key, api_version)
    return load_response_schema(api_key, api_version)


def request_type(api_key: int, api_version: int) -> type:
    """The entity class of a served request; raises ``UnsupportedApi`` otherwise."""
    return _entity_type(api_key, api_version, EntityType.request)


def response_type(api_key: int, api_version: int) -> type:
    """The entity class of a served response; raises ``UnsupportedApi`` otherwise."""
    return _entity_type(api_key, api_version, EntityType.response)


def is_flexible(entity: Any) -> bool:
    """Whether an entity class uses the compact (flexible) encoding."""
    return bool(entity.__flexible__)

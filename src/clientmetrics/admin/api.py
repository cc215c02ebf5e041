"""Client-metrics subscription operations, as coroutines (``AsyncAdmin``) and plain calls.

Each operation is written once, as a coroutine. ``Admin`` runs the same coroutines
on a private event loop (``asyncio.Runner``), so its connection survives between
calls; the module-level functions open an ``Admin`` for one call.
"""

from __future__ import annotations

import base64
import functools
import typing
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from clientmetrics.admin.connection import BrokerConnection, Transport
from clientmetrics.admin.errors import AdminError
from clientmetrics.admin.properties import AdminConfig
from clientmetrics.wire import AlterOp, ApiKey, ConfigResourceType, ErrorCode, request_type

__all__ = [
    "CLIENT_METRICS",
    "AsyncAdmin",
    "ClientMetricsResource",
    "ConfigEntry",
    "generate_name",
    "subscription_configs",
]

CLIENT_METRICS = ConfigResourceType.CLIENT_METRICS
"""``ConfigResource.Type.CLIENT_METRICS``."""
SOURCE_NAMES: Mapping[int, str] = {
    0: "UNKNOWN",
    1: "TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}


@dataclass(frozen=True)
class ConfigEntry:
    """One config of a resource, as DescribeConfigs returns it."""

    name: str
    value: str | None
    source: int
    """``ConfigSource`` id: 7 for a set key, 5 for a default (Kafka 4.1+ brokers)."""
    read_only: bool = False
    sensitive: bool = False

    @property
    def source_name(self) -> str:
        """Kafka's name of ``source`` (``CLIENT_METRICS_CONFIG``, ``DEFAULT_CONFIG`` ...)."""
        return SOURCE_NAMES.get(self.source, "UNKNOWN")

    @property
    def is_default(self) -> bool:
        """Whether the value is the default rather than a stored setting."""
        return self.source == 5


@dataclass(frozen=True)
class ClientMetricsResource:
    """A client-metrics subscription: its name and its configs in broker order."""

    name: str
    configs: tuple[ConfigEntry, ...]

    def as_dict(self) -> dict[str, str | None]:
        """``{config name: value}``."""
        return {entry.name: entry.value for entry in self.configs}


def subscription_configs(
    *,
    metrics: Sequence[str] | None = None,
    interval_ms: int | None = None,
    match: Sequence[str] | None = None,
) -> dict[str, str]:
    """The config map ``kafka-client-metrics --alter`` builds from its options.

    Lists are joined with ``,``; an empty list becomes ``""``, which ``alter`` sends
    as a DELETE of that key, as Kafka's tool does.
    """
    configs: dict[str, str] = {}
    if interval_ms is not None:
        configs["interval.ms"] = str(interval_ms)
    if metrics is not None:
        configs["metrics"] = ",".join(metrics)
    if match is not None:
        configs["match"] = ",".join(match)
    return configs


def generate_name() -> str:
    """A random name as ``Uuid.randomUuid().toString()`` makes it (base64url, 22 chars)."""
    while True:
        raw = uuid.uuid4()
        text = base64.urlsafe_b64encode(raw.bytes).decode("ascii").rstrip("=")
        # Kafka never hands out the reserved ids or a name that looks like an option.
        if raw.int not in (0, 1) and not text.startswith("-"):
            return text


def _check(code: Any, message: str | None) -> None:
    error = ErrorCode.for_code(int(code))
    if error is not ErrorCode.NONE:
        raise AdminError(error, message)


class AsyncAdmin:
    """Coroutine admin operations over one connection, opened on first use.

    Concurrent calls are safe (requests are serialised); after a timeout or an I/O
    error the next call opens a new connection.
    """

    def __init__(self, config: AdminConfig, transport: Transport | None = None) -> None:
        self._config = config
        self._transport = transport
        self._conn: BrokerConnection | None = None

    async def __aenter__(self) -> AsyncAdmin:
        await self._connection()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _connection(self) -> BrokerConnection:
        if self._conn is not None and self._conn.broken:
            await self.close()  # reconnect rather than read a desynchronised stream
        if self._conn is None:
            self._conn = await BrokerConnection.connect(self._config, self._transport)
        return self._conn

    async def close(self) -> None:
        """Close the connection (if one was opened)."""
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    async def list_client_metrics_resources(self) -> tuple[str, ...]:
        """Names of all subscriptions: ListConfigResources v1 (type 16) where supported, else v0."""
        conn = await self._connection()

        def body(version: int) -> Any:
            entity = request_type(ApiKey.LIST_CONFIG_RESOURCES, version)
            return entity(resource_types=(CLIENT_METRICS,)) if version >= 1 else entity()

        response = await conn.request(ApiKey.LIST_CONFIG_RESOURCES, body)
        _check(response.error_code, None)
        return tuple(
            str(item.resource_name)
            for item in response.config_resources
            if int(getattr(item, "resource_type", CLIENT_METRICS)) == CLIENT_METRICS
        )

    async def describe(self, name: str) -> ClientMetricsResource:
        """The configs of subscription ``name`` (an unknown name is not an error)."""
        conn = await self._connection()

        def body(version: int) -> Any:
            entity = request_type(ApiKey.DESCRIBE_CONFIGS, version)
            return entity(resources=(_describe_resource(entity, name),))

        response = await conn.request(ApiKey.DESCRIBE_CONFIGS, body)
        for result in response.results:
            _check(result.error_code, result.error_message)
            configs = tuple(
                ConfigEntry(
                    name=str(c.name),
                    value=None if c.value is None else str(c.value),
                    source=int(getattr(c, "config_source", -1)),
                    read_only=bool(c.read_only),
                    sensitive=bool(c.is_sensitive),
                )
                for c in result.configs
            )
            return ClientMetricsResource(name, configs)
        raise AdminError(ErrorCode.UNKNOWN_SERVER_ERROR, f"No result for client metrics {name}")

    async def describe_all(self) -> tuple[ClientMetricsResource, ...]:
        """Every subscription with its configs, in listing order."""
        names = await self.list_client_metrics_resources()
        return tuple([await self.describe(name) for name in names])

    async def alter(self, name: str, configs: Mapping[str, str]) -> None:
        """IncrementalAlterConfigs: SET each key, DELETE each key whose value is empty."""
        ops = [
            (key, AlterOp.DELETE if value == "" else AlterOp.SET, value)
            for key, value in configs.items()
        ]
        await self.incremental_alter(name, ops)

    async def delete(self, name: str) -> ClientMetricsResource:
        """Describe ``name``, then DELETE every key it returned (Kafka's ``--delete``)."""
        current = await self.describe(name)
        await self.incremental_alter(
            name, [(entry.name, AlterOp.DELETE, entry.value) for entry in current.configs]
        )
        return current

    async def incremental_alter(
        self, name: str, ops: Sequence[tuple[str, int, str | None]]
    ) -> None:
        """Raw IncrementalAlterConfigs on one resource: (key, op id, value) per op."""
        conn = await self._connection()

        def body(version: int) -> Any:
            entity = request_type(ApiKey.INCREMENTAL_ALTER_CONFIGS, version)
            return _alter_request(entity, name, ops)

        response = await conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
        for result in response.responses:
            _check(result.error_code, result.error_message)


@functools.cache
def _nested(entity: type, field: str) -> Any:
    """The element class of an array field of a kio entity."""
    hint = typing.get_type_hints(entity)[field]
    return typing.get_args(hint)[0]


def _describe_resource(entity: type, name: str) -> Any:
    return _nested(entity, "resources")(
        resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None
    )


def _alter_request(entity: type, name: str, ops: Sequence[tuple[str, int, str | None]]) -> Any:
    resource_cls = _nested(entity, "resources")
    config_cls = _nested(resource_cls, "configs")
    configs = tuple(
        config_cls(name=key, config_operation=op, value=value) for key, op, value in ops
    )
    resource = resource_cls(resource_type=CLIENT_METRICS, resource_name=name, configs=configs)
    return entity(resources=(resource,), validate_only=False)

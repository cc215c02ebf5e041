"""The subscription store interface.

A store persists the raw config map of each CLIENT_METRICS resource (name ->
{key: value}, values as the strings Kafka's config RPCs carry). Validation is the
telemetry core's job (``telemetry.configs``); the store only keeps what it is given.
An empty map deletes the resource.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from clientmetrics.errors import ClientMetricsError

ConfigMap = Mapping[str, str]
#: Called with (name, configs) whenever a resource changes, including changes made
#: by another gateway sharing the store; empty configs mean deleted.
ChangeListener = Callable[[str, ConfigMap], None]


class StoreError(ClientMetricsError):
    """The subscription store could not read or write."""


class SubscriptionStore(Protocol):
    """Durable storage of client-metrics subscriptions."""

    async def start(self, on_change: ChangeListener) -> dict[str, dict[str, str]]:
        """Open the store and return every resource; ``on_change`` sees later changes."""

    async def put(self, name: str, configs: ConfigMap) -> None:
        """Replace the configs of ``name`` durably; an empty map deletes it."""

    async def close(self) -> None:
        """Release the store."""

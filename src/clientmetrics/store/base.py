"""The subscription store interface.

A store persists the raw config map of each CLIENT_METRICS resource (name ->
{key: value}, values as the strings Kafka's config RPCs carry). Validation is the
telemetry core's job (``telemetry.configs``); the store only keeps what it is given.
An empty map deletes the resource.

Alters are read-modify-write: ``update`` reads the stored configs, applies the
caller's change and writes the result as one atomic step inside the store (a
transaction, or a compare-and-set on the resource's version), so concurrent
alters through any number of connections, workers and gateways all land.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from clientmetrics.errors import ClientMetricsError

ConfigMap = Mapping[str, str]
#: Called with (name, configs) whenever a resource changes, including changes made
#: by another gateway sharing the store; empty configs mean deleted.
ChangeListener = Callable[[str, ConfigMap], None]
#: Computes a resource's new configs from its stored ones (empty when absent). It
#: may run more than once (a compare-and-set retried) and on a store thread, so it
#: must be pure; an exception from it aborts the update and propagates.
Change = Callable[[dict[str, str]], ConfigMap]


class StoreError(ClientMetricsError):
    """The subscription store could not read or write."""


class SubscriptionStore(Protocol):
    """Durable storage of client-metrics subscriptions."""

    async def start(self, on_change: ChangeListener) -> dict[str, dict[str, str]]:
        """Open the store and return every resource; ``on_change`` sees later changes."""

    async def put(self, name: str, configs: ConfigMap) -> None:
        """Replace the configs of ``name`` durably; an empty map deletes it."""

    async def update(self, name: str, change: Change) -> dict[str, str]:
        """Atomically replace ``name``'s configs by ``change(stored)``; return the result."""

    async def close(self) -> None:
        """Release the store."""

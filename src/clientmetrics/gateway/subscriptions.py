"""The gateway's view of the client-metrics subscriptions: store <-> manager."""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from clientmetrics.store.base import Change, SubscriptionStore
from clientmetrics.telemetry.configs import ConfigError, validate
from clientmetrics.telemetry.manager import ClientMetricsManager

log = structlog.get_logger("clientmetrics.gateway")


class Subscriptions:
    """Keeps the raw configs of every resource and feeds validated ones to the manager.

    The store is the source of truth; this mirror changes only through the store's
    change notifications, so changes made by another gateway sharing the store
    reach this one's clients the same way as local ones.
    """

    def __init__(self, store: SubscriptionStore, manager: ClientMetricsManager) -> None:
        self._store = store
        self._manager = manager
        self._configs: dict[str, dict[str, str]] = {}

    async def start(self) -> None:
        for name, configs in (await self._store.start(self._changed)).items():
            self._changed(name, configs)

    def _changed(self, name: str, configs: Mapping[str, str]) -> None:
        if not configs:
            self._configs.pop(name, None)
            self._manager.update_subscription(name, None)
            return
        self._configs[name] = dict(configs)
        try:
            subscription = validate(name, configs)
        except ConfigError as exc:
            # Stored by an older version or another tool: keep it listed, match nothing.
            log.warning("stored_subscription_invalid", name=name, error=str(exc))
            self._manager.update_subscription(name, None)
            return
        self._manager.update_subscription(name, subscription)

    def get(self, name: str) -> dict[str, str]:
        """The stored configs of ``name`` (empty when unknown)."""
        return dict(self._configs.get(name, {}))

    def names(self) -> list[str]:
        return sorted(self._configs)

    async def update(self, name: str, change: Change) -> dict[str, str]:
        """Apply ``change`` to the stored configs atomically, in the store.

        Never on this mirror: it lags changes other workers and gateways made, and
        concurrent alters would overwrite each other. The change reaches the
        manager through the store's notification.
        """
        return await self._store.update(name, change)

    async def close(self) -> None:
        await self._store.close()

"""The gateway's view of the client-metrics subscriptions: store <-> manager."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import structlog

from clientmetrics.gateway.config import GatewayConfig
from clientmetrics.store.base import Change, SubscriptionStore
from clientmetrics.store.signing import RecordSigner, load_signer
from clientmetrics.telemetry.configs import ConfigError, validate
from clientmetrics.telemetry.manager import ClientMetricsManager
from clientmetrics.telemetry.model import Subscription
from clientmetrics.telemetry.watch_names import WATCH_PREFIX, WatchName, parse_watch_name

log = structlog.get_logger("clientmetrics.gateway")


class _AlreadyGone(Exception):
    """Aborts a delete whose resource another gateway (or admin) deleted first."""


#: Changes read from the store are installed at most this often: each install costs
#: the manager a recompilation and the next Get a new plan (tens of ms with 1,000
#: subscriptions), so a flood of records costs a few installs, not one per batch.
INSTALL_GAP_S = 0.25


def store_signer(config: GatewayConfig) -> RecordSigner | None:
    """The topic store's record signer, from ``subscriptions_key_file``; loud without one."""
    if config.subscriptions_key_file is not None:
        return load_signer(config.subscriptions_key_file)
    log.warning(
        "subscription_records_unsigned",
        topic=config.subscriptions_topic,
        hint="no subscriptions_key_file: anyone who may write to the topic can change every "
        "client's subscription (see docs/security.md, signed subscription records)",
    )
    return None


class Subscriptions:
    """Keeps the raw configs of every resource and feeds validated ones to the manager.

    The store is the source of truth; this mirror changes only through the store's
    change notifications, so changes made by another gateway sharing the store
    reach this one's clients the same way as local ones. The manager recompiles
    every subscription when they change, so changes arriving together (batches
    read from a topic, the store's contents at start) are installed together: on
    the next turn of the event loop, and at most once per ``INSTALL_GAP_S``. An
    alter through this gateway installs at once, before it is answered.
    """

    def __init__(self, store: SubscriptionStore, manager: ClientMetricsManager) -> None:
        self._store = store
        self._manager = manager
        self._configs: dict[str, dict[str, str]] = {}
        self._pending: dict[str, Subscription | None] = {}
        self._install: asyncio.Handle | None = None
        self._installed_at = float("-inf")

    async def start(self) -> None:
        for name, configs in (await self._store.start(self._changed)).items():
            self._changed(name, configs)
        self._install_pending()

    def _changed(self, name: str, configs: Mapping[str, str]) -> None:
        if not configs:
            self._configs.pop(name, None)
            self._pending[name] = None
        else:
            self._configs[name] = dict(configs)
            try:
                self._pending[name] = validate(name, configs)
            except ConfigError as exc:
                # Stored by an older version or another tool: keep it listed, match nothing.
                log.warning("stored_subscription_invalid", name=name, error=str(exc))
                self._pending[name] = None
        if self._install is None:
            loop = asyncio.get_running_loop()
            delay = self._installed_at + INSTALL_GAP_S - loop.time()
            self._install = (
                loop.call_later(delay, self._install_pending)
                if delay > 0
                else loop.call_soon(self._install_pending)
            )

    def _install_pending(self) -> None:
        if self._install is not None:
            self._install.cancel()
            self._install = None
        if not self._pending:
            return
        self._installed_at = asyncio.get_running_loop().time()
        subscriptions = dict(self._manager.subscriptions)
        for name, subscription in self._pending.items():
            if subscription is None:
                subscriptions.pop(name, None)
            else:
                subscriptions[name] = subscription
        self._pending.clear()
        self._manager.set_subscriptions(subscriptions.values())

    def get(self, name: str) -> dict[str, str]:
        """The stored configs of ``name`` (empty when unknown)."""
        return dict(self._configs.get(name, {}))

    def names(self) -> list[str]:
        return sorted(self._configs)

    def expired_watches(self, now_ms: int) -> list[WatchName]:
        """The watches (``telemetry.watch_names``) past their expiry at ``now_ms``."""
        found = []
        for name in self._configs:  # a prefix test each: cheap with every subscription stored
            if name.startswith(WATCH_PREFIX + "."):
                watch = parse_watch_name(name)
                if watch is not None and watch.expired(now_ms):
                    found.append(watch)
        return found

    async def delete_if_present(self, name: str) -> dict[str, str] | None:
        """Delete ``name`` in the store; its configs before, or None when it was gone.

        Idempotent across gateways: the check is inside the store's atomic
        update (transaction or compare-and-set), so of several deleting at once
        one writes the deletion and the others find it gone and write nothing.
        """
        before: list[dict[str, str]] = []

        def delete(stored: dict[str, str]) -> dict[str, str]:
            if not stored:
                raise _AlreadyGone
            before[:] = [stored]  # a retried compare-and-set: the last attempt is the one
            return {}

        try:
            await self.update(name, delete)
        except _AlreadyGone:
            return None
        return before[0]

    async def update(self, name: str, change: Change) -> dict[str, str]:
        """Apply ``change`` to the stored configs atomically, in the store.

        Never on this mirror: it lags changes other workers and gateways made, and
        concurrent alters would overwrite each other. The change reaches the
        manager through the store's notification.
        """
        new = await self._store.update(name, change)
        self._install_pending()  # the alter's answer follows: the manager has it first
        return new

    async def close(self) -> None:
        if self._install is not None:
            self._install.cancel()
        await self._store.close()

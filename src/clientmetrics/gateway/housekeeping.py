"""What a gateway process does for itself between requests: expire idle client
instances, close idle connections and expired SASL sessions, give freed memory back
to the OS, keep long-lived objects out of the garbage collector's full scans, delete
expired watches from its subscription store, and report loop stalls and accept
failures as rate-limited lines.

Each step is sliced or moved off the event loop so that it never holds it for long
(docs/operations.md, "Stalls").
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Mapping
from typing import Any

import structlog

from clientmetrics.gateway.handlers import ConnectionState
from clientmetrics.gateway.heap import HeapTrimmer
from clientmetrics.gateway.limits import ConnectionLimits, fd_soft_limit, now_ms
from clientmetrics.gateway.looplag import Stall
from clientmetrics.gateway.subscriptions import Subscriptions
from clientmetrics.store.base import StoreError
from clientmetrics.telemetry.manager import ClientMetricsManager

log = structlog.get_logger("clientmetrics.gateway")
#: How often long-lived objects are moved out of the cyclic GC's reach.
FREEZE_EVERY_S = 10.0
#: Instances the expiry task looks at per turn of the event loop: about 1-2.5 ms
#: (in one go, 200,000 instances created together took 237 ms to re-file).
EXPIRE_SLICE = 1000
#: The principal the audit log names for the deletion of an expired watch.
REAPER_PRINCIPAL = "clientmetrics-gateway:watch-reaper"
#: How long one turn's deletions of expired watches may take before the turn goes on
#: (a store that does not answer must not stop instance expiry); the rest is retried.
REAP_TIMEOUT_S = 10.0


def freeze_long_lived() -> None:
    """Keep the client-instance registry, and what start-up made, out of the cyclic
    GC's full scans.

    With a million tracked instances a full collection pauses the loop for about
    200 ms, straight into the push latency's tail. Instances hold no reference
    cycles and are freed by reference counting, so moving what survived a young
    collection to the permanent generation costs nothing but those scans.
    """
    gc.collect(1)
    gc.freeze()


class Housekeeping:
    """The periodic work of one gateway process (``run``) and its two log hooks."""

    def __init__(
        self,
        manager: ClientMetricsManager,
        limits: ConnectionLimits,
        connections: Mapping[int, ConnectionState],
        expiry_check_ms: float,
        node_id: int = 0,
    ) -> None:
        self._manager = manager
        self._limits = limits
        self._connections = connections
        self._every_s = expiry_check_ms / 1000
        #: Gives the memory of closed connections back to the OS (glibc keeps it).
        self._heap = HeapTrimmer()
        self._node_id = node_id
        #: The store whose expired watches are deleted; set once it is open.
        self.subscriptions: Subscriptions | None = None

    def connection_closed(self, conn: ConnectionState) -> None:
        """Forget ``conn``'s instances' connection, and count it for the heap trim."""
        self._manager.connection_closed(conn.connection_id)
        self._heap.closed()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_freeze = loop.time() + FREEZE_EVERY_S
        while True:
            await asyncio.sleep(self._every_s)
            now = now_ms()
            removed = self._manager.expire(now, EXPIRE_SLICE)
            while self._manager.expiry_due(now):  # a slice per turn: others are served between
                await asyncio.sleep(0)
                removed += self._manager.expire(now, EXPIRE_SLICE)
            if removed:
                log.debug("instances_expired", count=removed)
            self._close_expired(now)
            await self._reap_watches(now)
            if self._heap.due():  # ctypes lets go of the interpreter lock meanwhile
                await loop.run_in_executor(None, self._heap.trim)
            self._limits.fd_limit = fd_soft_limit()  # operators may change it at run time
            if loop.time() >= next_freeze:
                next_freeze = loop.time() + FREEZE_EVERY_S
                freeze_long_lived()

    def _close_expired(self, now: int) -> None:
        """Close idle connections and SASL sessions past their KIP-368 deadline."""
        for conn in list(self._connections.values()):
            close = conn.core.expired(now)
            if close is not None:
                conn.close(close)

    async def _reap_watches(self, now: int) -> None:
        """Delete the watches (``investigate.<owner>.<expiry>.<id>``) past their expiry.

        Nothing is left behind even when no ``investigate`` process or cron runs.
        Gateways sharing a store each do it; the store's atomic update makes every
        deletion but the first a no-op. Each deletion is audit-logged like an alter.
        """
        if self.subscriptions is None:
            return
        expired = self.subscriptions.expired_watches(now)
        if not expired:
            return
        try:
            async with asyncio.timeout(REAP_TIMEOUT_S):
                for watch in expired:
                    before = await self.subscriptions.delete_if_present(watch.name)
                    if before is not None:
                        log.info("subscription_changed", principal=REAPER_PRINCIPAL,
                                 source=f"node.id={self._node_id}", subscription=watch.name,
                                 api="watch-expiry", expired_at_ms=watch.expires_at_ms,
                                 before=before, after={})  # fmt: skip
        except (StoreError, TimeoutError) as exc:
            self._limits.warn("*", "watch_reap_failed", error=str(exc) or type(exc).__name__)

    def loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Accept failures (the open-files limit) as one rate-limited line, not a flood."""
        error = context.get("exception")
        if isinstance(error, OSError) and "accept" in str(context.get("message", "")):
            self._limits.warn(
                "*", "accept_failed", error=error.strerror, fd_limit=self._limits.fd_limit
            )
            return
        loop.default_exception_handler(context)

    def stalled(self, stall: Stall) -> None:
        """One event-loop delay over ``loop_stall_log_ms`` (a few lines a minute at most)."""
        fields: dict[str, Any] = {
            "lag_ms": round(stall.lag_s * 1000, 1),
            "cpu_ms": round(stall.cpu_s * 1000, 1),
        }
        if stall.gc_s is not None:
            fields.update(gc_ms=round(stall.gc_s * 1000, 1), gc_generation=stall.gc_generation)
        self._limits.warn("*", "loop_stalled", **fields)

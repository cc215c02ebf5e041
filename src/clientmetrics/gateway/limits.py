"""The connection limits of one gateway process, shared by all its listeners.

The policies are sans-IO (``wire.limits``, ``wire.server``); this module holds
the shared instances, the clock, and the rate-limited log lines a hit limit
gives (one line per bad frame once filled 47 MB of logs in a fuzzing run).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from clientmetrics.gateway.verify import Verifier
from clientmetrics.security.throttle import FailureThrottle
from clientmetrics.wire.limits import CreationRate, RequestBudget, SourceLimit, WarningLimiter
from clientmetrics.wire.server import ListenerPolicy

__all__ = ["ConnectionLimits", "now_ms", "raise_fd_limit"]

log = structlog.get_logger("clientmetrics.gateway")
#: Connections kept below the fd limit, for the store, landing files and upstream links.
FD_RESERVE = 64


def now_ms() -> int:
    """Wall-clock epoch milliseconds: the only clock the sans-IO cores see (telemetry
    instances, SASL sessions and tokens all expire in epoch time)."""
    return time.time_ns() // 1_000_000


def open_fds() -> int:
    """Files this process has open now (0 where /proc is missing)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def fd_soft_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def raise_fd_limit() -> int:
    """Raise the soft open-files limit to the hard one; return the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


@dataclass
class ConnectionLimits:
    """Shared by every connection of one gateway process."""

    max_request_bytes: int
    queued_max_request_bytes: int
    idle_ms: int
    max_connections_per_ip: int
    #: New connections a second per address (0: no limit); see ``throttle``.
    connection_creation_rate_per_ip: int = 0
    policy: ListenerPolicy = field(default_factory=ListenerPolicy)
    #: The open-files limit, and the files open before any client (store, logs...).
    fd_limit: int = 0
    base_fds: int = 0
    budget: RequestBudget = field(init=False)
    sources: SourceLimit = field(init=False)
    creation: CreationRate = field(init=False)
    warnings: WarningLimiter = field(init=False)
    #: Failed authentications per source: their answers are held back longer and longer.
    failures: FailureThrottle = field(default_factory=FailureThrottle)
    #: Runs SASL's costly checks (PLAIN's PBKDF2) off the event loop, a few at a time.
    verifier: Verifier = field(default_factory=Verifier)
    open_connections: int = 0
    #: Connections held unread and closed for coming too fast from their address.
    throttled: int = 0

    def __post_init__(self) -> None:
        self.budget = RequestBudget(self.queued_max_request_bytes)
        self.sources = SourceLimit(self.max_connections_per_ip)
        self.creation = CreationRate(self.connection_creation_rate_per_ip)
        self.warnings = WarningLimiter()

    def warn(self, source: str, event: str, *, level: str = "warning", **fields: Any) -> None:
        """Log ``event`` (at ``level``), at most a few times a minute per source and event."""
        decision = self.warnings.check(source, event, now_ms())
        if not decision.emit:
            return
        if decision.suppressed:
            fields["suppressed"] = decision.suppressed
        if level == "error":
            log.error(event, peer=source, **fields)
        else:
            log.warning(event, peer=source, **fields)

    def authentication_failed(self, host: str, principal: str | None) -> float:
        """Seconds to hold back the answer to a failed authentication from ``host``
        (``principal``: the one the client claimed, unverified; None when unreadable)."""
        return self.failures.failed(host, now_ms(), principal) / 1000

    def authenticated(self, host: str, principal: str) -> None:
        """``principal`` authenticated from ``host``: its own failures from there are
        forgotten, not other users' (an account one owns does not reset the delay of
        guesses at others)."""
        self.failures.succeeded(host, principal)

    def accept(self, host: str) -> bool:
        """Count a new connection from ``host``, or refuse it (with a log line)."""
        if not self.sources.open(host):
            self.warn(
                host,
                "connection_refused",
                reason="max_connections_per_ip",
                limit=self.sources.maximum,
            )
            return False
        self.open_connections += 1
        # At the limit itself the event loop drops new connections without a word;
        # say so before it gets there.
        if self.fd_limit and self.base_fds + self.open_connections >= self.fd_limit - FD_RESERVE:
            self.warn(
                "*",
                "connection_limit_near",
                reason="open_files_limit",
                connections=self.open_connections,
                fd_limit=self.fd_limit,
            )
        return True

    def throttle(self, host: str) -> float:
        """Seconds to hold a new connection from ``host`` unread before closing it, for
        coming over ``connection_creation_rate_per_ip`` (with a log line); 0: go on.

        Kafka's acceptor does the same: the client learns nothing until the close,
        and one that reconnects in a loop is slowed to a try per throttle. A held
        connection still counts against ``max_connections_per_ip``.
        """
        delay_ms = self.creation.throttle_ms(host, now_ms())
        if delay_ms:
            self.throttled += 1
            self.warn(
                host,
                "connection_throttled",
                reason="connection_creation_rate_per_ip",
                limit=self.creation.per_second,
                close_in_ms=delay_ms,
            )
        return delay_ms / 1000

    def release(self, host: str) -> None:
        """Forget a connection ``accept`` counted."""
        self.sources.close(host)
        self.open_connections -= 1

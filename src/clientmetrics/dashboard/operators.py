"""Logged-in operators: server-side sessions, their cookie, CSRF tokens, their admin credentials.

The dashboard's write actions (watch, narrow, stop) are done with the operator's
own SASL credentials, so the gateway's ``[authorization]`` or the cluster's
authorizer decides, never the dashboard. The credentials live only in the
server's memory, in a session keyed by a random id that the browser holds in an
HttpOnly, SameSite=Strict cookie; every POST carries the session's CSRF token.
The store is bounded (oldest session evicted) and sessions expire when idle.
No I/O here: the clock is a parameter, so everything is testable without sockets.
"""

from __future__ import annotations

import hmac
import secrets
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from clientmetrics.admin import AdminConfig
from clientmetrics.dashboard.login_throttle import ThrottleConfig
from clientmetrics.errors import ConfigurationError

__all__ = [
    "COOKIE",
    "MAX_FIELD",
    "MECHANISMS",
    "OperatorConfig",
    "Session",
    "SessionStore",
    "cookie_header",
    "csrf_ok",
    "session_id",
]

COOKIE = "cm_session"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Longest user name or password a login form may carry (a bound on what is kept).
MAX_FIELD = 256


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    """How write actions are served: off unless ``enabled``."""

    enabled: bool = False
    bootstrap_server: str | None = None
    #: The SASL mechanism operators log in with (their credentials go to the admin calls).
    mechanism: str = "PLAIN"
    #: Other client properties for the admin connection (``security.protocol``, ``ssl.*``).
    properties: Mapping[str, str] | None = None
    session_idle_s: float = 30 * 60
    max_sessions: int = 64
    #: The dashboard is served over TLS (the cookie gets ``Secure``).
    tls: bool = False
    #: Live points from this telemetry topic (broker plugin, topic exporter), read with the
    #: operator's credentials; None: the landing zone of the data directory.
    topic: str | None = None
    #: The topic's cluster when it is not ``bootstrap_server``'s.
    topic_bootstrap_server: str | None = None
    #: Failed logins allowed per address and per user name in a window.
    throttle: ThrottleConfig = field(default_factory=ThrottleConfig)

    def __post_init__(self) -> None:
        if self.enabled and not self.bootstrap_server:
            raise ConfigurationError("write actions need --bootstrap-server (where watches go)")
        if self.mechanism not in MECHANISMS:
            raise ConfigurationError(
                f"operator SASL mechanism must be one of {', '.join(MECHANISMS)}, "
                f"not {self.mechanism!r}"
            )
        if self.max_sessions < 1 or self.session_idle_s <= 0:
            raise ConfigurationError("max_sessions and session_idle_s must be positive")

    def admin_config(self, username: str, password: str) -> AdminConfig:
        """The admin connection of an operator: their own SASL login."""
        assert self.bootstrap_server is not None  # checked in __post_init__ when enabled
        props = self.client_properties(username, password)
        return AdminConfig.from_properties(self.bootstrap_server, props, timeout_s=15.0)

    def client_properties(self, username: str, password: str) -> dict[str, str]:
        """An operator's Kafka client properties (the admin calls', the topic reader's)."""
        props = dict(self.properties or {})
        props.setdefault("security.protocol", "SASL_PLAINTEXT")
        props["sasl.mechanism"] = self.mechanism
        module = (
            "org.apache.kafka.common.security.plain.PlainLoginModule"
            if self.mechanism == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule"
        )
        props["sasl.jaas.config"] = (
            f'{module} required username="{_quoted(username)}" password="{_quoted(password)}";'
        )
        return props


def _quoted(text: str) -> str:
    if '"' in text or "\\" in text or len(text) > MAX_FIELD:
        raise ConfigurationError("user names and passwords may not contain quotes or backslashes")
    return text


@dataclass(slots=True)
class Session:
    """One logged-in operator. ``admin`` holds their credentials (never shown or logged)."""

    sid: str
    operator: str
    csrf: str
    admin: AdminConfig
    last_used: float
    #: The same credentials as client properties (for the telemetry topic's reader).
    properties: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # keep credentials out of any log or traceback
        return f"Session(operator={self.operator!r})"


class SessionStore:
    """At most ``limit`` sessions; one idle ``idle_s`` is gone; the oldest is evicted."""

    def __init__(self, limit: int, idle_s: float, clock: Callable[[], float]) -> None:
        self._limit = limit
        self._idle_s = idle_s
        self._clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(
        self, operator: str, admin: AdminConfig, properties: Mapping[str, str] | None = None
    ) -> Session:
        """A new session; the least recently used one goes when the store is full."""
        self._expire()
        while len(self._sessions) >= self._limit:
            self._sessions.popitem(last=False)
        session = Session(
            secrets.token_urlsafe(32), operator, secrets.token_urlsafe(32), admin, self._clock(),
            dict(properties or {}),
        )  # fmt: skip
        self._sessions[session.sid] = session
        return session

    def get(self, sid: str | None) -> Session | None:
        """The live session of ``sid``, marked used; None when unknown or idle too long."""
        self._expire()
        session = self._sessions.get(sid or "")
        if session is None:
            return None
        session.last_used = self._clock()
        self._sessions.move_to_end(session.sid)
        return session

    def drop(self, sid: str) -> None:
        """Log out."""
        self._sessions.pop(sid, None)

    def _expire(self) -> None:
        cutoff = self._clock() - self._idle_s
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if oldest.last_used > cutoff:
                break
            self._sessions.popitem(last=False)


def cookie_header(sid: str, *, secure: bool, clear: bool = False) -> str:
    """The ``Set-Cookie`` value: HttpOnly, SameSite=Strict, Secure over TLS."""
    value = "" if clear else sid
    extra = "; Max-Age=0" if clear else ""
    return (
        f"{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict{'; Secure' if secure else ''}{extra}"
    )


def session_id(cookie: str | None) -> str | None:
    """The session id in a ``Cookie`` request header, if any."""
    for part in (cookie or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and value:
            return value
    return None


def csrf_ok(session: Session | None, token: str | None) -> bool:
    """Whether a POST's token is its session's (compared in constant time)."""
    if session is None or not token:
        return False
    return hmac.compare_digest(session.csrf.encode(), token.encode())

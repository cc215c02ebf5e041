"""The reporter: drives ``telemetry.client_state`` for one kafka-python client.

One daemon thread per client asks the state machine what is due, collects the
client's metrics, and sends the request through the client's own connections.
``enable_telemetry(client)`` is the one call an application makes; closing the
client then sends the terminating push first (bounded by ``close_timeout_s``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from clientmetrics.reporter.collect import Collector
from clientmetrics.reporter.kafka_python import KafkaPythonClient, TransportError
from clientmetrics.reporter.payload import encode_push
from clientmetrics.reporter.protocol import (
    GET_TELEMETRY_SUBSCRIPTIONS,
    PUSH_TELEMETRY,
    get_request,
    get_response_event,
    push_request,
    push_response_event,
)
from clientmetrics.telemetry.client_state import (
    Action,
    ClientState,
    ClientTelemetry,
    Closed,
    CloseRequested,
    Event,
    PushRequested,
    RequestFailed,
    SubscriptionReceived,
    SubscriptionRequested,
)
from clientmetrics.telemetry.model import RESERVED_UUIDS, kafka_uuid_text

__all__ = ["Reporter", "ReporterStats", "enable_telemetry", "new_client_instance_id"]

log = logging.getLogger("clientmetrics.reporter")


def new_client_instance_id(rng: random.Random | None = None, prefix: bytes = b"") -> uuid.UUID:
    """A random id as Java's ``Uuid.randomUuid()`` draws it (KIP-1313: the client's own).

    ``prefix`` (at most 6 bytes, before the version nibble) replaces its first bytes:
    the simulator tags a run's clients with it."""
    if len(prefix) > 6:
        raise ValueError("an instance id prefix is at most 6 bytes")
    source = rng or random.SystemRandom()
    shift = 128 - 8 * len(prefix)
    while True:
        drawn = source.getrandbits(128)
        if prefix:
            drawn = int.from_bytes(prefix, "big") << shift | drawn & ((1 << shift) - 1)
        candidate = uuid.UUID(int=drawn, version=4)
        if candidate not in RESERVED_UUIDS and not kafka_uuid_text(candidate).startswith("-"):
            return candidate


@dataclass
class ReporterStats:
    """What the reporter has done, for applications and tests."""

    subscriptions: int = 0
    pushes: int = 0
    terminating_pushes: int = 0
    errors: dict[int, int] = field(default_factory=dict)
    transport_failures: int = 0
    metrics_dropped: int = 0
    versions: set[int] = field(default_factory=set)


class Reporter:
    """KIP-714 telemetry for one kafka-python client (use ``enable_telemetry``)."""

    def __init__(
        self,
        client: KafkaPythonClient,
        *,
        request_timeout_s: float = 10.0,
        rng: random.Random | None = None,
        client_instance_id: uuid.UUID | None = None,
    ) -> None:
        self._client = client
        self._timeout_s = request_timeout_s
        self._rng = rng or random.Random()
        self._machine = ClientTelemetry(
            rng=self._rng, client_instance_id=client_instance_id or new_client_instance_id()
        )
        self._collector = Collector()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._subscribed = threading.Event()
        self._logged_disabled = False
        self.stats = ReporterStats()
        self._thread = threading.Thread(
            target=self._run, name=f"clientmetrics-reporter-{client.client_id}", daemon=True
        )

    # -- public API ---------------------------------------------------------

    def start(self) -> Reporter:
        """Start the reporter thread (``enable_telemetry`` does this)."""
        self._thread.start()
        return self

    @property
    def state(self) -> ClientState:
        """The state machine's current state."""
        return self._machine.state

    def client_instance_id(self, timeout_s: float = 0.0) -> uuid.UUID:
        """This client's instance id (KIP-1313: generated at construction).

        Waits up to ``timeout_s`` for the first subscription, as Java's
        ``clientInstanceId(timeout)`` does, because a v0 broker may assign another.
        """
        self._subscribed.wait(timeout_s)
        instance_id = self._machine.client_instance_id
        assert instance_id is not None
        return instance_id

    def close(self, timeout_s: float = 5.0) -> None:
        """Send the terminating push (if subscribed) and stop, waiting at most ``timeout_s``."""
        with self._lock:
            self._machine.handle(CloseRequested(), _now_ms())
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        with self._lock:
            self._machine.handle(Closed(), _now_ms())
        self._wake.set()

    # -- the thread ---------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                now = _now_ms()
                if self._machine.state is ClientState.TERMINATED:
                    return
                action = self._machine.poll(now)
                wait_ms = self._machine.time_to_next_ms(now)
            if action is None:
                self._wake.wait(1.0 if wait_ms is None else min(wait_ms / 1000, 1.0))
                self._wake.clear()
                continue
            try:
                if action is Action.GET_SUBSCRIPTIONS:
                    self._get_subscriptions()
                else:
                    self._push(terminating=action is Action.TERMINATING_PUSH)
            except Exception:  # a reporter bug must never take the application down
                log.exception("telemetry reporter failed; telemetry disabled")
                with self._lock:
                    self._machine.enabled = False
                    self._machine.handle(Closed(), _now_ms())
                return

    def _handle(self, event: Event) -> bool:
        """Apply ``event``; ``False`` if the reporter was closed meanwhile (event dropped)."""
        with self._lock:
            if self._machine.state is ClientState.TERMINATED:
                return False  # a late answer after the bounded close wait ran out
            self._machine.handle(event, _now_ms())
            disabled_by = self._machine.disabled_by
        if isinstance(event, SubscriptionReceived):
            self._subscribed.set()
        if disabled_by is not None and not self._logged_disabled:
            self._logged_disabled = True  # the KIP says log once, then stay quiet
            log.error("telemetry disabled after error %s", disabled_by)
        return True

    def _call(self, api_key: int, body_for: Any) -> tuple[int, Any] | None:
        instance_id = self._machine.client_instance_id
        assert instance_id is not None
        try:
            version, body = self._client.call(api_key, body_for, instance_id, self._timeout_s)
        except TransportError as exc:
            self.stats.transport_failures += 1
            log.debug("telemetry request failed: %s", exc)
            self._handle(RequestFailed(retriable=exc.retriable))
            return None
        self.stats.versions.add(version)
        return version, body

    def _get_subscriptions(self) -> None:
        if not self._handle(SubscriptionRequested()):
            return
        client_id = self._client.client_id
        instance_id = self._machine.client_instance_id
        assert instance_id is not None
        answer = self._call(
            GET_TELEMETRY_SUBSCRIPTIONS,
            lambda version: get_request(version, 0, client_id, instance_id)[1],
        )
        if answer is None:
            return
        event = get_response_event(answer[1])
        if isinstance(event, SubscriptionReceived):
            self.stats.subscriptions += 1
        else:
            self._count_error(event.error_code)
        self._handle(event)

    def _push(self, *, terminating: bool) -> None:
        subscription = self._machine.subscription
        assert subscription is not None
        points = self._collector.collect(self._client.read_metrics(), subscription, time.time_ns())
        encoded = encode_push(
            points,
            resource=self._client.resource_attributes(),
            accepted_compression_types=subscription.accepted_compression_types,
            max_bytes=subscription.telemetry_max_bytes,
        )
        self.stats.metrics_dropped += encoded.dropped
        if not self._handle(PushRequested()):
            return
        client_id = self._client.client_id
        instance_id = self._machine.client_instance_id
        assert instance_id is not None

        def body_for(version: int) -> Any:
            return push_request(
                version,
                0,
                client_id,
                instance_id,
                subscription_id=subscription.subscription_id,
                terminating=terminating,
                compression_type=encoded.compression_type,
                metrics=encoded.metrics,
            )[1]

        answer = self._call(PUSH_TELEMETRY, body_for)
        if answer is None:
            return
        event = push_response_event(answer[1])
        if hasattr(event, "error_code"):
            self._count_error(event.error_code)
        elif terminating:
            self.stats.terminating_pushes += 1
        else:
            self.stats.pushes += 1
        self._handle(event)

    def _count_error(self, code: int) -> None:
        self.stats.errors[code] = self.stats.errors.get(code, 0) + 1


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def enable_telemetry(
    client: Any,
    *,
    close_timeout_s: float = 5.0,
    request_timeout_s: float = 10.0,
    client_instance_id: uuid.UUID | None = None,
) -> Reporter:
    """Turn on KIP-714 telemetry for a kafka-python ``KafkaProducer``, ``KafkaConsumer``
    or ``KafkaAdminClient``; return its :class:`Reporter`.

    ``client.close()`` is wrapped so that the terminating push goes out, over the
    client's still-open connections, before the client shuts down.
    """
    adapter = KafkaPythonClient(client)
    adapter.add_connection_total()
    reporter = Reporter(
        adapter, request_timeout_s=request_timeout_s, client_instance_id=client_instance_id
    )
    original_close = client.close

    def close(*args: Any, **kwargs: Any) -> Any:
        reporter.close(close_timeout_s)
        return original_close(*args, **kwargs)

    client.close = close
    client.telemetry_reporter = reporter
    return reporter.start()

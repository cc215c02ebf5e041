"""Closing a librdkafka client so that its terminating push is certain.

librdkafka sends its goodbye push only when the handle is destroyed while its
telemetry state is "push scheduled" (rdkafka_telemetry.c,
``rd_kafka_telemetry_schedule_termination``): destroyed while a push is in flight,
it ends telemetry without one. A test that closes at an arbitrary moment therefore
loses the goodbye whenever a push's round trip is slow, as on a busy machine.

``Goodbye`` listens to the client's own telemetry debug log and closes right after
it logs an acknowledged push, when the next push is a whole interval away.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from confluent_kafka import Consumer, Producer

from tests.procs import MIN_DEADLINE_S

ACKNOWLEDGED = "PushTelemetryRequest succeeded"


class Goodbye(logging.Handler):
    """The telemetry log of one librdkafka client, and its certain close."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.DEBUG)
        self._lock = threading.Lock()
        self._acks = 0
        self.logger = logging.getLogger(f"tests.rdkafka.{name}")
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False
        self.logger.addHandler(self)

    def config(self, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` with the telemetry debug log routed here (served by ``poll``)."""
        return {**config, "debug": "telemetry", "logger": self.logger}

    def emit(self, record: logging.LogRecord) -> None:
        if ACKNOWLEDGED in record.getMessage():
            with self._lock:
                self._acks += 1

    @property
    def acknowledged(self) -> int:
        with self._lock:
            return self._acks

    def close_after_push(
        self, client: Producer | Consumer, timeout: float = MIN_DEADLINE_S
    ) -> None:
        """Close ``client`` right after its next acknowledged push."""
        seen = self.acknowledged
        deadline = time.monotonic() + timeout
        while self.acknowledged == seen:
            if time.monotonic() > deadline:
                raise AssertionError(f"no acknowledged push within {timeout}s")
            client.poll(0.05)
        client.close()
        self.logger.removeHandler(self)

"""Real librdkafka clients (confluent-kafka) for the demo: they push telemetry on their own."""

from __future__ import annotations

import threading
from typing import Any

#: librdkafka logs to stderr; the gateway serves no Produce/Fetch, so keep it quiet.
_QUIET = {"log_level": 0, "enable.metrics.push": True}


class RealClients:
    """Producers and a consumer polled on one thread until ``stop``.

    Closing them on ``stop`` makes librdkafka send its terminating push, so the
    inventory shows them as terminated rather than silent.
    """

    def __init__(self, bootstrap: str, producers: int = 2, consumers: int = 1) -> None:
        self._bootstrap = bootstrap
        self._counts = (producers, consumers)
        self._clients: list[Any] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        """How many clients there are."""
        return sum(self._counts)

    def start(self) -> None:
        """Create the clients and start polling them."""
        from confluent_kafka import Consumer, Producer

        producers, consumers = self._counts
        for index in range(producers):
            config = {"bootstrap.servers": self._bootstrap, "client.id": f"demo-producer-{index}"}
            self._clients.append(Producer({**config, **_QUIET}))
        for index in range(consumers):
            consumer = Consumer(
                {
                    "bootstrap.servers": self._bootstrap,
                    "client.id": f"demo-consumer-{index}",
                    "group.id": "demo-group",
                    **_QUIET,
                }
            )
            consumer.subscribe(["demo-topic"])
            self._clients.append(consumer)
        self._thread = threading.Thread(target=self._poll, name="demo-real-clients", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                for client in self._clients:
                    client.poll(0.05)

    def stop(self) -> None:
        """Stop polling and close every client (each sends a terminating push)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        with self._lock:
            for client in self._clients:
                if hasattr(client, "close"):
                    client.close()
                else:
                    client.flush(2)
            self._clients.clear()

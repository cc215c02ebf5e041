"""Real librdkafka clients (confluent-kafka) for the demo: they push telemetry on their own.

With a broker behind the gateway (proxy mode), the producers send a small message
every ``_SEND_EVERY_S`` to one topic and the consumer group reads them, so the
clients' request, byte and record metrics move; in standalone mode they only
connect and push.
"""

from __future__ import annotations

import threading
import time
from typing import Any

#: librdkafka logs to stderr; keep it quiet (the demo's own lines say what happens).
_QUIET = {"log_level": 0, "enable.metrics.push": True}
_SEND_EVERY_S = 0.2
TOPIC = "demo-topic"


class RealClients:
    """Producers and a consumer polled on one thread until ``stop``.

    Closing them on ``stop`` makes librdkafka send its terminating push, so the
    inventory shows them as terminated rather than silent.
    """

    def __init__(
        self, bootstrap: str, producers: int = 2, consumers: int = 1, *, traffic: bool = False
    ) -> None:
        self._bootstrap = bootstrap
        self._counts = (producers, consumers)
        self._traffic = traffic
        self._producers: list[Any] = []
        self._consumers: list[Any] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.topic = TOPIC
        #: Messages the producers had acknowledged, and the consumers read, so far.
        self.produced = 0
        self.consumed = 0

    @property
    def count(self) -> int:
        """How many clients there are."""
        return sum(self._counts)

    def start(self) -> None:
        """Create the clients (and the topic, with a broker) and start polling them."""
        from confluent_kafka import Consumer, Producer

        if self._traffic:
            self._create_topic()
        producers, consumers = self._counts
        for index in range(producers):
            config = {"bootstrap.servers": self._bootstrap, "client.id": f"demo-producer-{index}"}
            self._producers.append(Producer({**config, **_QUIET}))
        for index in range(consumers):
            consumer = Consumer(
                {
                    "bootstrap.servers": self._bootstrap,
                    "client.id": f"demo-consumer-{index}",
                    "group.id": "demo-group",
                    "auto.offset.reset": "earliest",
                    **_QUIET,
                }
            )
            consumer.subscribe([self.topic])
            self._consumers.append(consumer)
        self._thread = threading.Thread(target=self._poll, name="demo-real-clients", daemon=True)
        self._thread.start()

    def _create_topic(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        # Not one of the demo's clients: it pushes no telemetry.
        quiet = {**_QUIET, "enable.metrics.push": False}
        admin = AdminClient({"bootstrap.servers": self._bootstrap, **quiet})
        futures = admin.create_topics([NewTopic(self.topic, num_partitions=2)], request_timeout=10)
        for future in futures.values():
            try:
                future.result(10)
            except Exception as exc:  # the topic may exist already: consuming still works
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise

    def _delivered(self, error: Any, _message: Any) -> None:
        if error is None:
            self.produced += 1

    def _poll(self) -> None:
        next_send = time.monotonic()
        while not self._stop.is_set():
            with self._lock:
                if self._traffic and time.monotonic() >= next_send:
                    next_send += _SEND_EVERY_S
                    for index, producer in enumerate(self._producers):
                        value = f"demo message from producer {index}".encode()
                        producer.produce(self.topic, value=value, on_delivery=self._delivered)
                for producer in self._producers:
                    producer.poll(0.02)
                for consumer in self._consumers:
                    message = consumer.poll(0.05)
                    if message is not None and message.error() is None:
                        self.consumed += 1

    def stop(self) -> None:
        """Stop polling and close every client (each sends a terminating push)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        with self._lock:
            for producer in self._producers:
                producer.flush(2)
            for consumer in self._consumers:
                consumer.close()
            self._producers.clear()
            self._consumers.clear()

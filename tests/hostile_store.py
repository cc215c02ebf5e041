"""Records anyone with write access to the subscription topic can produce, and timed Gets.

Shared by the store's tests and ``bench/store_flood.py``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Sequence

from confluent_kafka import Producer

from clientmetrics.wire import RequestHeader, decode_response, encode_request, request_type
from tests.frames import recv_frame

#: The incident's poison: 200 KB of nesting, which ``json.loads`` recurses into.
POISON = b'{"configs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
#: The same under the size bound (40 KB): only the depth check stops it.
DEEP = b'{"configs": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"

Record = tuple[bytes, bytes | None, Sequence[tuple[str, bytes]]]


def produce(bootstrap: str, topic: str, records: Iterable[Record]) -> None:
    """Write ``(key, value, headers)`` records straight to the topic, acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
    failed: list[object] = []
    for key, value, headers in records:
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=list(headers),
            on_delivery=lambda err, _m: failed.append(err) if err else None,
        )
        producer.poll(0)
    assert producer.flush(30) == 0, "records not delivered"
    assert not failed, failed


def flood(count: int, prefix: str = "flood") -> list[Record]:
    """``count`` distinct, valid, unsigned subscriptions."""
    return [
        (f"{prefix}-{i:05d}".encode(), json.dumps({"configs": {"metrics": f"m{i}."}}).encode(), ())
        for i in range(count)
    ]


def get_latency(port: int, timeout_s: float = 10.0) -> float:
    """Seconds from sending a GetTelemetrySubscriptions (new connection) to its answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        get = request_type(71, 0)(client_instance_id=uuid.UUID(int=0))
        started = time.perf_counter()
        sock.sendall(encode_request(RequestHeader(71, 0, 1, "flood-probe"), get))
        _, answer = decode_response(71, 0, recv_frame(sock))
        elapsed = time.perf_counter() - started
    assert int(answer.error_code) == 0, answer
    return elapsed


class GetProbe:
    """Gets sent one after another from a thread until stopped; each one's latency."""

    def __init__(self, port: int, every_s: float = 0.01) -> None:
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self._port = port
        self._every = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> GetProbe:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.latencies.append(get_latency(self._port))
            except (OSError, AssertionError) as exc:
                self.errors.append(repr(exc))
            self._stop.wait(self._every)

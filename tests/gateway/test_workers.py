"""Several worker processes sharing one port behave as one gateway."""

from __future__ import annotations

import socket
import struct
import urllib.request
import uuid
from pathlib import Path

import pytest

from clientmetrics.wire import RequestHeader, decode_response, encode_request, request_type
from tests.kadmin import set_subscription
from tests.procs import GatewayProcess, free_port, free_port_block, wait_for

pytestmark = pytest.mark.integration


def fresh_get(port: int) -> tuple[str, ...]:
    """RequestedMetrics seen by a brand-new client on a new connection."""
    get = request_type(71, 0)(client_instance_id=uuid.UUID(int=0))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(encode_request(RequestHeader(71, 0, 1, "w"), get))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        _, body = decode_response(71, 0, sock.recv(size, socket.MSG_WAITALL))
    return tuple(body.requested_metrics)


def test_two_workers_share_subscriptions_and_serve_metrics(tmp_path: Path) -> None:
    port = free_port()
    admin = free_port_block(2)
    gw = GatewayProcess(
        tmp_path / "data",
        port=port,
        extra_args=("--workers", "2", "--admin-listen", f"127.0.0.1:{admin}"),
    )
    gw.start()
    try:
        wait_for(lambda: len(gw.events("gateway_started")) == 2, 30, what="both workers")
        assert {fresh_get(port) for _ in range(20)} == {()}
        set_subscription(
            gw.bootstrap, "all", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
        )
        # Connections land on either worker; within the store's poll interval all agree.
        wait_for(
            lambda: {fresh_get(port) for _ in range(20)} == {("org.apache.kafka.",)},
            10,
            what="every worker to serve the new subscription",
        )
        for metrics_port in (admin, admin + 1):
            body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5)
            assert b"kafka_server_client_metrics_instance_count" in body.read()
    finally:
        assert gw.stop() == 0
    assert gw.tracebacks() == []

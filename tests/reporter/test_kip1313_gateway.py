"""KIP-1313 at the byte level: header v3, the per-connection rules, the v0/v1 table.

Raw sockets against a real gateway process, frames built with ``clientmetrics.wire``.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from clientmetrics.reporter.kafka_python import _Request
from clientmetrics.reporter.protocol import get_request, push_request
from clientmetrics.telemetry.otlp import build_metrics_data, gauge
from clientmetrics.wire import (
    ErrorCode,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_request_header,
    request_type,
)
from clientmetrics.wire.server import Respond, Serve, ServerConnection
from tests.frames import recv_frame
from tests.kadmin import set_subscription
from tests.landed import landed_rows
from tests.procs import MIN_DEADLINE_S, GatewayProcess, wait_for

pytestmark = pytest.mark.integration

FAST = """
[exporters.landing]
roll_seconds = 0.3
"""
INVALID_REQUEST = 42
ZERO = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path_factory.mktemp("kip1313") / "data", FAST).start()
    set_subscription(gw.bootstrap, "all", {"metrics": "org.apache.kafka.", "interval.ms": "60000"})
    yield gw
    assert gw.stop() == 0


class Conn:
    """A blocking Kafka connection that sends whatever headers the test builds."""

    def __init__(self, gw: GatewayProcess) -> None:
        self.sock = socket.create_connection(("127.0.0.1", gw.port), timeout=MIN_DEADLINE_S)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def _frame(self) -> bytes:
        return recv_frame(self.sock)

    def call(self, header: RequestHeader, body: Any) -> Any:
        self.sock.sendall(encode_request(header, body))
        return decode_response(header.api_key, header.api_version, self._frame())[1]

    def next_id(self) -> int:
        self.correlation += 1
        return self.correlation

    def api_versions(self, client_id: str | None = "raw") -> Any:
        body = request_type(18, 3)(client_software_name="raw", client_software_version="1")
        return self.call(RequestHeader(18, 3, self.next_id(), client_id), body)

    def get(self, version: int, instance: uuid.UUID, client_id: str | None = "raw") -> Any:
        header, body = get_request(version, self.next_id(), client_id, instance)
        return self.call(header, body)

    def push(
        self,
        version: int,
        instance: uuid.UUID,
        subscription_id: int,
        metrics: bytes = b"",
        client_id: str | None = "raw",
    ) -> Any:
        header, body = push_request(
            version,
            self.next_id(),
            client_id,
            instance,
            subscription_id=subscription_id,
            terminating=False,
            compression_type=0,
            metrics=metrics,
        )
        return self.call(header, body)


@pytest.fixture
def conn(gateway: GatewayProcess) -> Iterator[Conn]:
    c = Conn(gateway)
    yield c
    c.close()


def payload(name: str = "org.apache.kafka.producer.record.queue.time.avg") -> bytes:
    data = build_metrics_data([gauge(name, 1.5, time_unix_nano=1)])
    return bytes(data.SerializeToString())


def test_reporter_request_bytes_round_trip_through_header_v3() -> None:
    instance = uuid.uuid4()
    request = _Request(71, 1, get_request(1, 0, "x", instance)[1], instance)
    request.with_header(correlation_id=77, client_id="rep-client")
    frame = request.encode(header=True, framed=True)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    header, body = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.header_version) == (71, 1, 3)
    assert (header.correlation_id, header.client_id) == (77, "rep-client")
    assert header.client_instance_id == instance
    # Layout: prefix, int16-length client id, 16 id bytes, empty tagged fields, empty body.
    raw = frame[4:]
    assert raw[8:10] == struct.pack(">h", len("rep-client"))
    assert raw[20:36] == instance.bytes
    assert raw[36:] == b"\x00\x00"
    assert not hasattr(body, "client_instance_id")


def test_first_v3_request_needs_a_non_zero_id(conn: Conn) -> None:
    assert int(conn.get(1, ZERO).error_code) == INVALID_REQUEST


def test_later_requests_must_repeat_the_first_id(conn: Conn) -> None:
    mine, other = uuid.uuid4(), uuid.uuid4()
    first = conn.get(1, mine)
    assert int(first.error_code) == 0
    sub = int(first.subscription_id)
    assert int(conn.push(1, other, sub).error_code) == INVALID_REQUEST
    assert int(conn.push(1, ZERO, sub).error_code) == INVALID_REQUEST
    # A request without any id (ApiVersions has no v3-header version) is refused too.
    assert int(conn.api_versions().error_code) == INVALID_REQUEST
    # None of those touched the instance: its one post-Get push is still available.
    assert int(conn.push(1, mine, sub).error_code) == 0


def test_sasl_handshake_is_exempt(gateway: GatewayProcess, conn: Conn) -> None:
    # The admission rule itself: SaslHandshake cannot carry an id, so it passes.
    core = ServerConnection(served={71: (0, 1), 3: (0, 12)})
    instance = uuid.uuid4()

    def result(header: RequestHeader) -> object:
        return core.receive_frame(encode_request_header(header) + b"\x00" * 8, 0)

    assert isinstance(result(RequestHeader(71, 1, 1, "raw", instance, 3)), Serve)
    core.complete(0, None)
    # Not refused by KIP-1313: a listener without SASL answers ILLEGAL_SASL_STATE.
    assert result(RequestHeader(17, 1, 2, "raw", None, 1)) == Respond(1)
    assert struct.unpack_from(">h", b"".join(core.data_to_send()), 8)[0] == 34
    assert result(RequestHeader(3, 12, 3, "raw", None, 2)) == Respond(
        2, ErrorCode.INVALID_REQUEST, rejected="kip1313_instance_id"
    )
    # Over the wire: the standalone gateway serves no SASL, but it does not count the
    # request as a KIP-1313 rejection.
    assert int(conn.get(1, instance).error_code) == 0
    body = struct.pack(">hhih", 17, 1, conn.next_id(), 3) + b"raw" + struct.pack(">h", 5)
    conn.sock.sendall(struct.pack(">i", len(body) + 5) + body + b"PLAIN")
    with contextlib.suppress(ConnectionError, OSError):
        frame = conn._frame()
        assert struct.unpack_from(">h", frame, 4)[0] != INVALID_REQUEST
    rejected = [e for e in gateway.events("request_rejected") if e.get("api_key") == 17]
    assert rejected == []


def test_rules_apply_only_when_the_first_request_used_v3(conn: Conn) -> None:
    assert int(conn.api_versions().error_code) == 0
    a, b = uuid.uuid4(), uuid.uuid4()
    assert int(conn.get(1, a).error_code) == 0
    assert int(conn.get(1, b).error_code) == 0  # several instances may share it


def test_client_id_of_the_first_request_applies_to_the_connection(
    gateway: GatewayProcess, conn: Conn
) -> None:
    assert int(conn.api_versions(client_id="first-request-id").error_code) == 0
    instance = uuid.uuid4()
    sub = int(conn.get(1, instance, client_id=None).subscription_id)
    assert int(conn.push(1, instance, sub, payload(), client_id="ignored").error_code) == 0
    wait_for(
        lambda: any(
            r["client_instance_id"] == str(instance) for r in landed_rows(gateway.data_dir)
        ),
        10,
        what="the push to land",
    )
    row = next(r for r in landed_rows(gateway.data_dir) if r["client_instance_id"] == str(instance))
    assert row["client_id"] == "first-request-id"


def landed_ids(gateway: GatewayProcess) -> set[str]:
    return {str(r["client_instance_id"]) for r in landed_rows(gateway.data_dir)}


def test_the_kip_table_new_broker_column(gateway: GatewayProcess, conn: Conn) -> None:
    # Old client, v0: a zero id on the first Get gets a broker-assigned one (UUID-B).
    old = conn.get(0, ZERO)
    assigned = old.client_instance_id
    assert int(old.error_code) == 0
    assert assigned not in (None, ZERO)
    assert int(conn.push(0, assigned, int(old.subscription_id), payload()).error_code) == 0
    # New client, v0: sends its own id in the body (UUID-R); the gateway adopts it.
    own_v0 = uuid.uuid4()
    new_v0 = conn.get(0, own_v0)
    assert int(new_v0.error_code) == 0
    # KIP-1313's table says the response carries 0 here; Kafka's broker echoes the id
    # (reference §1.1), and so does the gateway. Either way the client keeps its own.
    assert new_v0.client_instance_id in (ZERO, own_v0)
    assert int(conn.push(0, own_v0, int(new_v0.subscription_id), payload()).error_code) == 0
    # New client, v1: the id only in header v3 (UUID-H), on its own connection.
    v1_conn = Conn(gateway)
    try:
        own_v1 = uuid.uuid4()
        new_v1 = v1_conn.get(1, own_v1)
        assert not hasattr(new_v1, "client_instance_id")
        assert int(v1_conn.push(1, own_v1, int(new_v1.subscription_id), payload()).error_code) == 0
    finally:
        v1_conn.close()
    wanted = {str(assigned), str(own_v0), str(own_v1)}
    wait_for(lambda: wanted <= landed_ids(gateway), 10, what="all three pushes to land")


def test_v1_get_without_an_id_is_invalid_even_after_a_v2_first_request(conn: Conn) -> None:
    assert int(conn.api_versions().error_code) == 0
    assert int(conn.get(1, ZERO).error_code) == INVALID_REQUEST

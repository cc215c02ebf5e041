"""Bad requests get Kafka's answer (or a closed connection) and never hurt the gateway."""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from clientmetrics.wire import (
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_request,
    request_type,
)
from tests.frames import recv_frame
from tests.procs import MIN_DEADLINE_S, GatewayProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(Path(tmp_path_factory.mktemp("gw")) / "data").start()
    yield gw
    assert gw.stop() == 0
    assert gw.tracebacks() == []


def roundtrip(port: int, frame: bytes) -> bytes | None:
    """Send one framed request; the response frame, or None if the gateway closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=MIN_DEADLINE_S) as sock:
        sock.sendall(frame)
        head = b""
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                return None
            head += chunk
        size = struct.unpack(">i", head)[0]
        body = b""
        while len(body) < size:
            chunk = sock.recv(size - len(body))
            assert chunk, "connection closed mid-response"
            body += chunk
        return body


def raw_request(api_key: int, version: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", api_key, version, 7, 4) + b"test" + body
    return struct.pack(">i", len(payload)) + payload


def test_unknown_api_key_closes_the_connection(gateway: GatewayProcess) -> None:
    assert roundtrip(gateway.port, raw_request(9999, 0)) is None


def test_unsupported_version_of_a_served_api_closes_the_connection(gateway: GatewayProcess) -> None:
    assert roundtrip(gateway.port, raw_request(3, 99)) is None


def test_api_versions_with_unknown_version_gets_v0_error_with_its_own_range(
    gateway: GatewayProcess,
) -> None:
    # A future ApiVersions is flexible: header v2, so an empty tagged-field buffer.
    response = roundtrip(gateway.port, raw_request(18, 99, b"\x00"))
    assert response is not None
    correlation, error = struct.unpack(">ih", response[:6])
    assert (correlation, error) == (7, ErrorCode.UNSUPPORTED_VERSION)
    count = struct.unpack(">i", response[6:10])[0]
    # As Kafka 4.4.0 answers: only ApiVersions' own range, so the client can ask again.
    assert count == 1
    assert struct.unpack(">hhh", response[10:16]) == (18, 0, 4)


def test_push_with_zero_instance_id_is_invalid_request(gateway: GatewayProcess) -> None:
    header = RequestHeader(72, 0, 11, "bad-push")
    push = request_type(72, 0)(
        client_instance_id=uuid.UUID(int=0),
        subscription_id=0,
        terminating=False,
        compression_type=0,
        metrics=b"",
    )
    frame = roundtrip(gateway.port, encode_request(header, push))
    assert frame is not None
    correlation, body = decode_response(72, 0, frame)
    assert correlation == 11
    assert int(body.error_code) == ErrorCode.INVALID_REQUEST


def test_header_v3_connection_rejects_a_different_instance_id(gateway: GatewayProcess) -> None:
    """KIP-1313: the first v3 request fixes the connection's instance id."""
    first_id, other_id = uuid.uuid4(), uuid.uuid4()
    get_v1 = request_type(71, 1)()
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=MIN_DEADLINE_S) as sock:
        for correlation, instance in ((1, first_id), (2, other_id)):
            header = RequestHeader(71, 1, correlation, "v3", instance, header_version=3)
            sock.sendall(encode_request(header, get_v1))
        codes = []
        buf = b""
        while len(codes) < 2:
            buf += sock.recv(4096)
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                size = struct.unpack(">i", buf[:4])[0]
                _, body = decode_response(71, 1, buf[4 : 4 + size])
                codes.append(int(body.error_code))
                buf = buf[4 + size :]
    assert codes == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST]


def test_gateway_still_serves_after_bad_requests(gateway: GatewayProcess) -> None:
    for _ in range(3):
        roundtrip(gateway.port, struct.pack(">i", 3) + b"\x00\x01\x02")
    response = roundtrip(gateway.port, raw_request(18, 0))
    assert response is not None
    assert struct.unpack(">ih", response[:6]) == (7, 0)


def test_get_again_within_the_interval_is_throttled_not_unknown_error(
    gateway: GatewayProcess,
) -> None:
    """A second Get before the push interval is THROTTLING_QUOTA_EXCEEDED (89), not -1.

    The Java client disables telemetry for good on UNKNOWN_SERVER_ERROR.
    """
    get = request_type(71, 0)(client_instance_id=uuid.UUID(int=0))
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=MIN_DEADLINE_S) as sock:
        sock.sendall(encode_request(RequestHeader(71, 0, 1, "again"), get))
        _, body = decode_response(71, 0, recv_frame(sock))
        assert int(body.error_code) == ErrorCode.NONE
        instance = body.client_instance_id
        again = request_type(71, 0)(client_instance_id=instance)
        sock.sendall(encode_request(RequestHeader(71, 0, 2, "again"), again))
        correlation, body = decode_response(71, 0, recv_frame(sock))
    assert correlation == 2
    assert int(body.error_code) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    # Kafka's getErrorResponse leaves every other field at its default.
    assert body.client_instance_id == uuid.UUID(int=0)
    assert instance != uuid.UUID(int=0)


@pytest.mark.parametrize(
    ("name", "version", "expected"),
    [
        ("<script>x</script>", "1.0", ErrorCode.INVALID_REQUEST),
        ("librdkafka", "2.16.1 (patched)", ErrorCode.INVALID_REQUEST),
        ("librdkafka", "2.16.1", ErrorCode.NONE),
    ],
)
def test_api_versions_v3_software_name_and_version_must_match_kafkas_pattern(
    gateway: GatewayProcess, name: str, version: str, expected: ErrorCode
) -> None:
    request = request_type(18, 3)(client_software_name=name, client_software_version=version)
    frame = roundtrip(gateway.port, encode_request(RequestHeader(18, 3, 9, "sw"), request))
    assert frame is not None
    correlation, body = decode_response(18, 3, frame)
    assert (correlation, int(body.error_code)) == (9, expected)
    # Kafka's error response lists no APIs; a good one lists the telemetry APIs.
    keys = {int(item.api_key) for item in body.api_keys}
    if expected is ErrorCode.NONE:
        assert {18, 71, 72} <= keys
    else:
        assert keys == set()


def test_push_with_null_metrics_is_an_accepted_empty_push(gateway: GatewayProcess) -> None:
    """librdkafka before PR #4912 sends null Metrics; Kafka drops the connection."""
    get = request_type(71, 0)(client_instance_id=uuid.UUID(int=0))
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=MIN_DEADLINE_S) as sock:
        sock.sendall(encode_request(RequestHeader(71, 0, 1, "null-push"), get))
        _, sub = decode_response(71, 0, recv_frame(sock))
        push = request_type(72, 0)(
            client_instance_id=sub.client_instance_id,
            subscription_id=sub.subscription_id,
            terminating=False,
            compression_type=0,
            metrics=b"",
        )
        frame = encode_request(RequestHeader(72, 0, 2, "null-push"), push)
        assert frame[-2:] == b"\x01\x00"  # Metrics: empty compact bytes, then tags
        sock.sendall(frame[:-2] + b"\x00\x00")  # Metrics: null
        correlation, body = decode_response(72, 0, recv_frame(sock))
    assert (correlation, int(body.error_code)) == (2, ErrorCode.NONE)

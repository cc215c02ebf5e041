"""Real clients against a loopback server speaking only through clientmetrics.wire.

librdkafka (confluent-kafka) and kafka-python must be able to bootstrap
(ApiVersions, Metadata) from our encoded responses, and read our error responses.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from clientmetrics.wire import (
    SERVED,
    ErrorCode,
    FrameDecoder,
    RequestHeader,
    UnsupportedApi,
    blank_entity,
    decode_request,
    encode_response,
    error_response,
    response_type,
)
from tests.procs import MIN_DEADLINE_S

pytestmark = pytest.mark.integration


def _item(entity_type: type, field_name: str) -> Any:
    return entity_type.__dataclass_fields__[field_name].type.__args__[0]


def _answer(header: RequestHeader, body: Any, port: int) -> bytes:
    if header.api_key == 18:
        response = response_type(18, header.api_version)
        item = _item(response, "api_keys")
        listed = tuple(
            item(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in sorted(SERVED.items())
        )
        return encode_response(
            header, blank_entity(response, error_code=KioErrorCode.none, api_keys=listed)
        )
    if header.api_key == 3:
        response = response_type(3, header.api_version)
        broker = blank_entity(_item(response, "brokers"), node_id=1, host="127.0.0.1", port=port)
        body = blank_entity(response, brokers=(broker,), controller_id=1, cluster_id="wire-test")
        return encode_response(header, body)
    return error_response(header, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, body)


class LoopbackBroker:
    """A thread-per-connection server; records every decoded request."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.requests: list[tuple[RequestHeader, Any]] = []
        self.failures: list[BaseException] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        # A client that resets its connection (librdkafka on close) just ends it.
        with conn, contextlib.suppress(ConnectionError):
            self._serve_frames(conn)

    def _serve_frames(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        while data := conn.recv(65536):
            for frame in decoder.feed(data):
                try:
                    header, body = decode_request(frame)
                except UnsupportedApi as exc:
                    if exc.header is None:
                        raise
                    conn.sendall(error_response(exc.header, ErrorCode.UNSUPPORTED_VERSION))
                    continue
                except BaseException as exc:  # recorded for the test to fail on
                    self.failures.append(exc)
                    return
                self.requests.append((header, body))
                conn.sendall(_answer(header, body, self.port))


@pytest.fixture
def broker() -> Iterator[LoopbackBroker]:
    server = LoopbackBroker()
    yield server
    server.listener.close()
    assert server.failures == []


def test_librdkafka_bootstraps_and_reads_our_errors(broker: LoopbackBroker) -> None:
    admin = pytest.importorskip("confluent_kafka.admin")
    client = admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"})
    assert client.list_topics(timeout=MIN_DEADLINE_S).cluster_id == "wire-test"
    (future,) = client.describe_configs([admin.ConfigResource("BROKER", "1")]).values()
    with pytest.raises(Exception, match="CLUSTER_AUTHORIZATION_FAILED"):
        future.result(timeout=10)
    seen = {(header.api_key, header.api_version) for header, _ in broker.requests}
    assert {(18, 3), (3, 12)} <= seen
    software = {b.client_software_name for h, b in broker.requests if h.api_key == 18}
    assert software == {"confluent-kafka-python"}


def test_kafka_python_bootstraps_and_reads_our_errors(broker: LoopbackBroker) -> None:
    kafka = pytest.importorskip("kafka")
    errors = pytest.importorskip("kafka.errors")
    client = kafka.KafkaAdminClient(
        bootstrap_servers=f"127.0.0.1:{broker.port}", request_timeout_ms=5000
    )
    try:
        with pytest.raises(errors.ClusterAuthorizationFailedError):
            client.describe_cluster()
    finally:
        client.close()
    seen = {(header.api_key, header.api_version) for header, _ in broker.requests}
    assert (18, 4) in seen
    assert any(api_key == 60 for api_key, _ in seen)

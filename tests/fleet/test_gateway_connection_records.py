"""A standalone gateway lands a connection record for each client it serves."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.config_load import load_config
from clientmetrics.telemetry.connections import CONNECTION_ARROW, landed_connections
from clientmetrics.wire import RequestHeader, decode_response, encode_request, request_type
from tests.frames import recv_frame
from tests.procs import GatewayProcess, wait_for

pytestmark = pytest.mark.integration


def _api_versions(port: int, client_id: str, name: str, version: str) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        body = request_type(18, 3)(client_software_name=name, client_software_version=version)
        sock.sendall(encode_request(RequestHeader(18, 3, 1, client_id), body))
        _, answer = decode_response(18, 3, recv_frame(sock))
        assert answer.error_code == 0


def _subscribe(port: int, client_id: str) -> uuid.UUID:
    """GetTelemetrySubscriptions with a zero id on a connection left open: the id given."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    get = request_type(71, 0)(client_instance_id=uuid.UUID(int=0))
    sock.sendall(encode_request(RequestHeader(71, 0, 1, client_id), get))
    _, sub = decode_response(71, 0, recv_frame(sock))
    _OPEN.append(sock)
    return uuid.UUID(str(sub.client_instance_id))


_OPEN: list[socket.socket] = []


def _landed(root: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for path in sorted(root.glob("date=*/hour=*/*.parquet")):
        table = pq.read_table(path)
        assert table.schema.equals(CONNECTION_ARROW, check_metadata=False)
        rows += table.to_pylist()
    return rows


def _by_client(rows: list[dict[str, object]]) -> dict[object, list[dict[str, object]]]:
    out: dict[object, list[dict[str, object]]] = {}
    for row in rows:
        out.setdefault(row["client_id"], []).append(row)
    return out


def test_every_connection_lands_as_its_client_keys_record(tmp_path: Path) -> None:
    config = "[gateway]\nnode_id = 4\nconnection_records_interval_ms = 300\n"
    gw = GatewayProcess(tmp_path / "data", config).start()
    root = landed_connections(tmp_path / "data")
    try:
        for _ in range(3):
            _api_versions(gw.port, "orders", "sarama", "1.61.1")
        instance = _subscribe(gw.port, "pusher")

        def seen() -> bool:
            clients = _by_client(_landed(root))
            orders = sum(int(str(r["connections"])) for r in clients.get("orders", []))
            return orders == 3 and "pusher" in clients

        wait_for(seen, 60, what="records of both clients")
        clients = _by_client(_landed(root))
        orders = clients["orders"]
        assert {(r["client_software_name"], r["client_software_version"]) for r in orders} == {
            ("sarama", "1.61.1")
        }
        assert {(r["principal"], r["listener"], r["client_source_address"]) for r in orders} == {
            ("User:ANONYMOUS", "PLAINTEXT", "127.0.0.1")
        }
        assert {r["node_id"] for r in orders} == {4}
        for row in orders:
            assert row["interval_start_ms"] <= row["first_seen_ms"] <= row["last_seen_ms"]  # type: ignore[operator]
            assert row["last_seen_ms"] <= row["interval_end_ms"]  # type: ignore[operator]
        pusher = clients["pusher"]
        # Still open: counted once in each interval, with the instance it was given.
        assert {r["client_instance_id"] for r in pusher} == {str(instance)}
        assert {r["client_software_name"] for r in pusher} == {"unknown"}
        assert {r["telemetry_requested"] for r in pusher} == {True}
        assert {r["telemetry_requested"] for r in orders} == {False}
        assert gw.metric("connection_records_dropped_total") == 0
        assert gw.metric("connection_records_written_total") >= 2
    finally:
        for sock in _OPEN:
            sock.close()
        _OPEN.clear()
        assert gw.stop() == 0
    assert gw.tracebacks() == []


def test_a_stopping_gateway_lands_the_interval_under_way(tmp_path: Path) -> None:
    """An hour-long interval: what was seen before a clean stop is landed by the stop."""
    config = "[gateway]\nconnection_records_interval_ms = 3600000\n"
    gw = GatewayProcess(tmp_path / "data", config).start()
    root = landed_connections(tmp_path / "data")
    try:
        _api_versions(gw.port, "brief", "kafka-python", "3.0.12")
        assert _landed(root) == []
    finally:
        assert gw.stop() == 0
    (row,) = _landed(root)
    assert (row["client_id"], row["client_software_name"], row["connections"]) == (
        "brief",
        "kafka-python",
        1,
    )


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("connection_records_interval_ms = -1", "connection_records_interval_ms must be 0"),
        ("connection_records_max_keys = 0", "connection_records_max_keys must be at least 1"),
    ],
)
def test_bad_connection_record_settings_are_refused(
    tmp_path: Path, setting: str, message: str
) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(f"[gateway]\n{setting}\n")
    with pytest.raises(ConfigurationError, match=message):
        load_config(path, data_dir=tmp_path, environ={})

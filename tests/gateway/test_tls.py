"""TLS listeners of a gateway process: mTLS principals land, certificates rotate on SIGHUP."""

from __future__ import annotations

import signal
import socket
import ssl
import struct
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.kadmin import set_subscription
from tests.landed import landed_rows
from tests.procs import GatewayProcess, wait_for
from tests.tlsfiles import TestCA, served_serial

pytestmark = pytest.mark.integration


def tls_config(ca: TestCA, *, extra: str = "") -> str:
    return f"""
[exporters.landing]
roll_seconds = 0.3

[tls]
certificate = "{ca.root / "server.crt"}"
private_key = "{ca.root / "server.key"}"
ca = "{ca.ca}"
{extra}
"""


def start(tmp_path: Path, config: str) -> tuple[GatewayProcess, int]:
    """A gateway with a PLAINTEXT listener (for the admin calls) and an SSL one."""
    gw = GatewayProcess(tmp_path / "data", config, extra_args=("--listen", "SSL://127.0.0.1:0"))
    gw.start()
    listeners = gw.events("gateway_started")[0]["listeners"]
    assert isinstance(listeners, dict)
    return gw, int(str(listeners["SSL"]).rsplit(":", 1)[1])


def test_client_certificate_principal_is_mapped_and_lands(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "pki")
    ca.issue("server")
    client = ca.issue("client", common_name="Client1")
    rules = 'principal_mapping_rules = "RULE:^CN=([^,]+),OU=Test,O=Acme$/$1/L, DEFAULT"'
    gw, port = start(tmp_path, tls_config(ca, extra=f'client_auth = "required"\n{rules}'))
    try:
        set_subscription(
            gw.bootstrap, "all", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
        )
        producer = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{port}",
                "client.id": "mtls-prod",
                "security.protocol": "ssl",
                "ssl.ca.location": str(ca.ca),
                "ssl.certificate.location": str(client.certificate),
                "ssl.key.location": str(client.private_key),
                "log_level": 3,
            }
        )

        def landed() -> bool:
            producer.poll(0.1)
            return any(
                r["client_id"] == "mtls-prod" and r["payload"] for r in landed_rows(gw.data_dir)
            )

        wait_for(landed, 60, interval=0.1, what="a push over mTLS")
        producer.flush(1)
        rows = [r for r in landed_rows(gw.data_dir) if r["client_id"] == "mtls-prod"]
        assert {r["principal"] for r in rows} == {"User:client1"}
        # without a client certificate the handshake is refused: nothing is answered
        assert api_versions_over_tls(port, ca.client_context()) is None
    finally:
        assert gw.stop() == 0
    assert gw.tracebacks() == []


def api_versions_over_tls(port: int, context: ssl.SSLContext) -> bytes | None:
    """An ApiVersions v0 round trip; None if the gateway closed the connection."""
    payload = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            tls.sendall(struct.pack(">i", len(payload)) + payload)
            return tls.recv(65536) or None
    except (ssl.SSLError, ConnectionError):
        return None


def test_sighup_rotates_the_certificate_for_new_connections(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "pki")
    first = ca.issue("server")
    # no polling: only the signal reloads
    gw, port = start(tmp_path, tls_config(ca, extra="reload_check_s = 0"))
    try:
        context = ca.client_context()
        assert served_serial(port, context) == first.serial
        response = api_versions_over_tls(port, context)
        assert response is not None
        assert struct.unpack(">ih", response[4:10]) == (1, 0)  # correlation id, no error
        second = ca.issue("server")
        assert served_serial(port, context) == first.serial
        assert gw.proc is not None
        gw.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: gw.events("tls_reloaded"), 10, what="the reload")
        assert served_serial(port, context) == second.serial
    finally:
        assert gw.stop() == 0
    assert gw.tracebacks() == []

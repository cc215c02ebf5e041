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
from tests.procs import MIN_DEADLINE_S, GatewayProcess, wait_for
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
    stranger = ca.issue("stranger", common_name="Client1", org="Other")
    rules = 'principal_mapping_rules = "RULE:^CN=([^,]+),OU=Test,O=Acme$/$1/L"'
    gw, port = start(tmp_path, tls_config(ca, extra=f'client_auth = "requested"\n{rules}'))
    try:
        set_subscription(
            gw.bootstrap, "all", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
        )
        tls = {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "ssl",
            "ssl.ca.location": str(ca.ca),
            "log_level": 3,
        }
        with_cert = Producer(
            {
                **tls,
                "client.id": "mtls-prod",
                "ssl.certificate.location": str(client.certificate),
                "ssl.key.location": str(client.private_key),
            }
        )
        without_cert = Producer({**tls, "client.id": "anon-prod"})

        def landed() -> bool:
            with_cert.poll(0.05)
            without_cert.poll(0.05)
            ids = {r["client_id"] for r in landed_rows(gw.data_dir) if r["payload"]}
            return {"mtls-prod", "anon-prod"} <= ids

        wait_for(landed, 60, interval=0.1, what="pushes over TLS with and without a certificate")
        with_cert.flush(1)
        without_cert.flush(1)
        principals: dict[object, set[object]] = {}
        for row in landed_rows(gw.data_dir):
            principals.setdefault(row["client_id"], set()).add(row["principal"])
        assert principals["mtls-prod"] == {"User:client1"}
        assert principals["anon-prod"] == {"User:ANONYMOUS"}
        # a certificate no rule maps is refused, as Kafka refuses it
        assert api_versions_over_tls(port, ca.client_context(stranger)) is None
        assert api_versions_over_tls(port, ca.client_context(client)) is not None
        refused = gw.events("tls_principal_refused")
        assert len(refused) == 1
        assert "CN=Client1,OU=Test,O=Other" in str(refused[0]["error"])
    finally:
        assert gw.stop() == 0
    assert gw.tracebacks() == []


def api_versions_over_tls(port: int, context: ssl.SSLContext) -> bytes | None:
    """An ApiVersions v0 round trip; None if the gateway closed the connection."""
    payload = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=MIN_DEADLINE_S) as raw,
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

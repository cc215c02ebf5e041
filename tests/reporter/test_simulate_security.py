"""``clientmetrics simulate`` over SASL_SSL (SCRAM-SHA-512) and with a bad password.

The front terminates TLS and answers SASL with the gateway's own mechanisms, then
relays to a real gateway, as a SASL_SSL listener will.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from clientmetrics.security import SaslConfig, build_sasl_server, derive
from clientmetrics.store.credentials import CredentialFile
from tests.admin.front import Front
from tests.procs import BIN, GatewayProcess
from tests.tlsfiles import server_context

pytestmark = pytest.mark.integration


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[tuple[Front, Path]]:
    gw = GatewayProcess(tmp_path / "data").start()
    credentials = CredentialFile.in_data_dir(tmp_path / "data")
    credentials.upsert(
        "loadgen",
        {"SCRAM-SHA-512": derive("SCRAM-SHA-512", "lg-pw", salt=b"s" * 16, iterations=4096)},
    )
    ca = trustme.CA()
    context = server_context(ca)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server = build_sasl_server(SaslConfig(("SCRAM-SHA-512",)), credentials, seed=b"x" * 16)
    front = Front(("127.0.0.1", gw.port), ssl_context=context, sasl_server=server).start()
    yield front, ca_file
    front.stop()
    gw.stop()


def simulate(front: Front, ca_file: Path, password: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(BIN / "clientmetrics"), "simulate",
            "--bootstrap-server", f"127.0.0.1:{front.port}",
            "--clients", "20", "--clients-per-connection", "10", "--interval-ms", "500",
            "--duration", "2", "--json",
            "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512",
            "--sasl-username", "loadgen", "--sasl-password", password, "--ssl-ca", str(ca_file),
        ],
        capture_output=True, timeout=60, text=True, check=False,
    )  # fmt: skip


def test_simulate_over_sasl_ssl(secured: tuple[Front, Path]) -> None:
    front, ca_file = secured
    result = simulate(front, ca_file, "lg-pw")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    # Every client did its handshake and said goodbye, and pushes came in between: events,
    # not a count per second (a busy machine makes fewer).
    assert (report["errors"], report["handshakes"], report["terminating_pushes"]) == ({}, 20, 20)
    assert report["pushes"] > report["terminating_pushes"]
    # The admin connections (--interval-ms's subscription: created, then deleted) and the
    # two client connections authenticated.
    assert front.principals == ["User:loadgen"] * 4


def test_a_wrong_password_is_refused(secured: tuple[Front, Path]) -> None:
    front, ca_file = secured
    result = simulate(front, ca_file, "wrong")
    assert result.returncode == 1
    assert result.stderr == (
        "clientmetrics simulate: Authentication failed during authentication due to invalid "
        "credentials with SASL mechanism SCRAM-SHA-512\n"
    )
    assert front.principals == []

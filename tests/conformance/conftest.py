"""One Apache Kafka 4.4 broker and one standalone gateway for the whole package, side by side.

Each listens twice: PLAINTEXT, where the differential tests send raw frames, and
SASL_SSL (SCRAM, a certificate from one test CA), where Kafka's tools and ours run with
``--command-config`` (the file the broker's launcher writes serves the gateway too).
Kafka carries the launcher's recording test plugin: it advertises 71/72 and writes
down what it hands a plugin.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from peers.kafka import KafkaBroker, PeerUnavailable, minimal_plugin
from peers.kafka.tools import ToolSession

from tests.kafka import broker_tls, kafka_broker
from tests.procs import BIN, GatewayProcess, free_port
from tests.tlsfiles import TestCA

ADMIN_PASSWORD = "admin-secret"


@pytest.fixture(scope="package")
def tools() -> Iterator[ToolSession]:
    """Kafka's tools in one JVM, started first so it warms up while the servers start."""
    try:
        session = ToolSession()
    except PeerUnavailable as exc:
        pytest.skip(f"Kafka's tools are not available here: {exc}")
    yield session
    session.close()


@pytest.fixture(scope="package")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="package")
def plugin_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where Kafka's plugin writes one JSON line per push it is handed."""
    return tmp_path_factory.mktemp("plugin") / "pushes.jsonl"


@pytest.fixture(scope="package")
def kafka(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    ca: TestCA,
    plugin_record: Path,
    tools: ToolSession,  # its JVM starts first and loads while the broker starts
) -> Iterator[KafkaBroker]:
    try:
        plugin = minimal_plugin(plugin_record)
    except PeerUnavailable as exc:
        pytest.skip(f"Apache Kafka 4.4 is not available here: {exc}")
    yield from kafka_broker(
        request,
        tmp_path_factory,
        listener="SASL_SSL",
        also_plaintext=True,
        tls=broker_tls(ca),
        admin_password=ADMIN_PASSWORD,
        plugins=[plugin],
    )


@pytest.fixture(scope="package")
def gateway(tmp_path_factory: pytest.TempPathFactory, ca: TestCA) -> Iterator[GatewayProcess]:
    data = tmp_path_factory.mktemp("gateway")
    pem = ca.issue("gateway")
    subprocess.run(
        [str(BIN / "clientmetrics"), "users", "add", "admin", "--data-dir", str(data),
         "--password-stdin"],
        input=f"{ADMIN_PASSWORD}\n", text=True, check=True, capture_output=True,
    )  # fmt: skip
    config = (
        f'[tls]\ncertificate = "{pem.certificate}"\nprivate_key = "{pem.private_key}"\n'
        '[sasl]\nmechanisms = ["SCRAM-SHA-256", "SCRAM-SHA-512"]\n'
        "[exporters.landing]\nroll_seconds = 0.3\n"
    )
    secure = f"127.0.0.1:{free_port()}"
    gw = GatewayProcess(data, config, extra_args=("--listen", f"SASL_SSL://{secure}")).start()
    gw.secure_bootstrap = secure  # type: ignore[attr-defined]
    yield gw
    gw.stop()


@pytest.fixture(scope="package")
def ports(kafka: KafkaBroker, gateway: GatewayProcess) -> dict[str, int]:
    """The PLAINTEXT ports, for raw frames."""
    return {"kafka": kafka.plaintext_port, "gateway": gateway.port}


@pytest.fixture(scope="package")
def secure(kafka: KafkaBroker, gateway: GatewayProcess) -> dict[str, str]:
    """The SASL_SSL bootstrap addresses, for the tools."""
    return {"kafka": kafka.bootstrap, "gateway": gateway.secure_bootstrap}  # type: ignore[attr-defined]

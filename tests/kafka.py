"""Apache Kafka 4.4 for a test module: started once, stopped by PID, its log shown on failure.

    @pytest.fixture(scope="module")
    def kafka(request, tmp_path_factory):
        yield from kafka_broker(request, tmp_path_factory, authorizer=True, ...)

Without a JDK or Maven (or when Maven Central cannot be reached) the module's tests are
skipped with the reason; ``make test`` fetches everything first, so there they run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from peers.free_ports import free_port_block
from peers.kafka import KafkaBroker, PeerUnavailable, Plugin, TlsFiles, clientmetrics_plugin

from tests.procs import GatewayProcess
from tests.tlsfiles import TestCA

#: The launcher's node.id.
KAFKA_NODE = 1


def kafka_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, **options: Any
) -> Iterator[KafkaBroker]:
    """Start a broker with ``options`` (see :class:`KafkaBroker`), yield it, stop it."""
    workdir = tmp_path_factory.mktemp("kafka")
    if str(options.get("listener", "PLAINTEXT")).endswith("SSL") and "tls" not in options:
        options["tls"] = broker_tls(TestCA(workdir / "tls"))
    broker = KafkaBroker(workdir / "node", **options)
    failed_before = request.session.testsfailed
    try:
        broker.start()
    except PeerUnavailable as exc:
        pytest.skip(f"Apache Kafka 4.4 is not available here: {exc}")
    print(broker.summary())
    try:
        yield broker
    finally:
        broker.stop()
        if request.session.testsfailed > failed_before:
            print(f"--- kafka log ({broker.log_path}), last lines ---\n{broker.log_tail()}")


def broker_tls(ca: TestCA) -> TlsFiles:
    """A certificate for 127.0.0.1 from ``ca``, as the broker's TLS files."""
    pem = ca.issue("broker")
    return TlsFiles(ca.ca, pem.certificate, pem.private_key)


def proxy_gateway(broker: KafkaBroker, data_dir: Any, toml: str = "") -> Iterator[GatewayProcess]:
    """A gateway in proxy mode in front of ``broker`` (landing files every 0.3 s, then
    ``toml``), yielded; it must stop with status 0 and no traceback."""
    base = free_port_block(KAFKA_NODE + 1)
    gateway = GatewayProcess(
        data_dir,
        toml + "[exporters.landing]\nroll_seconds = 0.3\n",
        extra_args=("--upstream", broker.bootstrap, "--broker-port-base", str(base)),
    ).start()
    yield gateway
    assert gateway.stop() == 0
    assert gateway.tracebacks() == []


def plugin_to_itself(port: int, topic: str, properties: Mapping[str, str] | None = None) -> Plugin:
    """The clientmetrics plugin writing each push to ``topic`` on its own broker, whose
    PLAINTEXT listener is ``port`` (chosen before the broker starts), with ``properties``
    (names without ``clientmetrics.``)."""
    settings = {"bootstrap.servers": f"127.0.0.1:{port}", "topic": topic}
    return clientmetrics_plugin({**settings, **(properties or {})})

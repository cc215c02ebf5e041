"""One Apache Kafka 4.4 broker (with the recording test plugin) and one standalone gateway
per test module, side by side."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from peers.kafka import KafkaBroker, PeerUnavailable, minimal_plugin

from tests.kafka import kafka_broker
from tests.procs import GatewayProcess

FAST_LANDING = "[exporters.landing]\nroll_seconds = 0.3\n"


@pytest.fixture(scope="module")
def plugin_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where Kafka's plugin writes one JSON line per push it is handed."""
    return tmp_path_factory.mktemp("plugin") / "pushes.jsonl"


@pytest.fixture(scope="module")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, plugin_record: Path
) -> Iterator[KafkaBroker]:
    try:
        plugin = minimal_plugin(plugin_record)
    except PeerUnavailable as exc:
        pytest.skip(f"Apache Kafka 4.4 is not available here: {exc}")
    yield from kafka_broker(request, tmp_path_factory, plugins=[plugin])


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path_factory.mktemp("gateway"), FAST_LANDING).start()
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def ports(kafka: KafkaBroker, gateway: GatewayProcess) -> dict[str, int]:
    return {"kafka": kafka.port, "gateway": gateway.port}

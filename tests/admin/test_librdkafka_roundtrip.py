"""A subscription made with the tool changes what real librdkafka clients push."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.admin.tool import run_tool
from tests.landed import names_of, rows_of
from tests.procs import GatewayProcess, wait_for

pytestmark = pytest.mark.integration

FAST = "[exporters.landing]\nroll_seconds = 0.3\n"


@pytest.fixture
def landing_gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path / "data", FAST).start()
    yield gw
    assert gw.stop() == 0


def producer(bootstrap: str, client_id: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "log_level": 3})


def test_match_selects_which_real_client_pushes(landing_gateway: GatewayProcess) -> None:
    result = run_tool(
        "--bootstrap-server",
        landing_gateway.bootstrap,
        "--alter",
        "--name",
        "only-wanted",
        "--metrics",
        "org.apache.kafka.producer.",
        "--interval",
        "500",
        "--match",
        "client_id=wanted-.*",
    )
    assert (result.code, result.out) == (0, "Altered client metrics config for only-wanted.\n")
    wanted = producer(landing_gateway.bootstrap, "wanted-1")
    other = producer(landing_gateway.bootstrap, "other-1")

    def wanted_pushed_three_times() -> bool:
        wanted.poll(0.05)
        other.poll(0.05)
        return sum(1 for r in rows_of(landing_gateway.data_dir, "wanted-1") if r["payload"]) >= 3

    try:
        wait_for(wanted_pushed_three_times, 45, what="three metric pushes from wanted-1")
    finally:
        wanted.flush(1)
        other.flush(1)
    names = names_of(rows_of(landing_gateway.data_dir, "wanted-1"))
    assert names
    assert all(name.startswith("org.apache.kafka.producer.") for name in names)
    assert all(
        row["push_interval_ms"] == 500 for row in rows_of(landing_gateway.data_dir, "wanted-1")
    )
    # The other client ran just as long, but its subscription came back empty.
    assert rows_of(landing_gateway.data_dir, "other-1") == []

"""The dashboard's live view from the telemetry topic (the broker plugin's way in).

As ``test_topic_live`` does for the command: records made as the topic exporter
writes them are produced to a real broker (Tansu) after the watch is made on a
standalone gateway through the dashboard's own action; the page's live
endpoint shows the watched instance's points only, and after the stop the
client back on another subscription.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from clientmetrics.admin import AdminConfig
from clientmetrics.dashboard import Dashboard, DashboardConfig
from clientmetrics.dashboard.operators import OperatorConfig
from tests.investigate.test_topic_live import OTHER, TOPIC, WATCHED, pushes, tansu
from tests.pipeline.topic_records import produce
from tests.procs import GatewayProcess, TansuProcess, wait_for
from tests.synthetic import GAUGES, NODE_GAUGES, PREFIX

pytestmark = pytest.mark.integration
__all__ = ["tansu"]  # the fixture, shared


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path / "data").start()
    yield gw
    assert gw.stop() == 0


def test_live_points_from_the_topic(
    tansu: TansuProcess, gateway: GatewayProcess, tmp_path: Path
) -> None:
    operators = OperatorConfig(
        enabled=True, bootstrap_server=gateway.bootstrap, topic=TOPIC,
        topic_bootstrap_server=tansu.bootstrap,
    )  # fmt: skip
    dash = Dashboard(DashboardConfig(tmp_path), operators=operators)
    # This gateway has no SASL listener: the session is made as a login would make it.
    session = dash.investigate.sessions.create("op", AdminConfig.from_properties(gateway.bootstrap))
    cookie = f"cm_session={session.sid}"
    producer = Producer({"bootstrap.servers": tansu.bootstrap, "log_level": 3})
    produce(producer, TOPIC, pushes(step=1), partitions=[0, 1])  # before the watch: not shown
    form = f"client_id=slow-app&metrics={PREFIX}&interval_s=1&expires_min=5&csrf={session.csrf}"
    made = dash.handle("/investigate/watch", "POST", form, cookie)
    assert made.status == 303, made.body
    name = dict(made.headers)["Location"].removeprefix("/investigate/watch/")
    assert re.fullmatch(r"investigate\.op\.[0-9]{8}T[0-9]{6}Z\.[0-9a-f]{8}", name)
    produce(producer, TOPIC, pushes(step=8), partitions=[1, 0])
    expected = len(GAUGES) + len(NODE_GAUGES) * 2 + 2  # node 1 and -1; two sums
    points: list[dict[str, Any]] = []

    def poll() -> dict[str, Any]:
        after = points[-1]["seq"] if points else -1
        answer = dash.handle(f"/investigate/live/{name}?after={after}", cookie=cookie)
        data: dict[str, Any] = json.loads(answer.body)
        points.extend(data["points"])
        return data

    def enough() -> bool:
        poll()
        return len(points) >= expected

    wait_for(enough, 60, what="the watched instance's points")
    assert {p["instance"] for p in points} == {WATCHED}
    assert OTHER not in json.dumps(points)
    latency = [p for p in points if p["metric"] == PREFIX + "node.request.latency.avg"]
    assert {(p["node"], p["value"], p["unit"]) for p in latency} >= {("1", 12.0, "ms")}
    stopped = dash.handle("/investigate/stop", "POST", f"name={name}&csrf={session.csrf}", cookie)
    assert stopped.status == 303
    produce(producer, TOPIC, pushes(step=9, subscription_id=2, who=(WATCHED,)))
    wait_for(lambda: poll()["back"], 60, what="the client back")
    assert poll()["back"] == [
        {"instance": WATCHED, "subscription_id": 2, "was": 1, "text": "subscription_id=2 (was 1)"}
    ]

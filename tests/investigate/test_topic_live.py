"""The live view from the telemetry topic: deployments with no landing zone.

The topic's records are made as the topic exporter writes them
(``tests/pipeline/topic_records``) and produced to a real broker (Tansu) while
``clientmetrics investigate watch --topic`` runs; the watch itself is made on a
standalone gateway. Points of the watched instance appear, with their values and
``node.id``; another client's and a push from before the watch started do not; a
push on another subscription after the stop shows the client back.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.pipeline.topic_records import produce
from tests.procs import BIN, MIN_DEADLINE_S, GatewayProcess, TansuProcess, wait_for
from tests.synthetic import GAUGES, NODE_GAUGES, PREFIX, Push, landing_table, producer_payload

pytestmark = pytest.mark.integration

TOPIC = "client-telemetry"
WATCHED = str(uuid.UUID(int=0x0A))
OTHER = str(uuid.UUID(int=0x0B))


@pytest.fixture
def tansu(tmp_path: Path) -> Iterator[TansuProcess]:
    broker = TansuProcess(log_path=tmp_path / "tansu.log").start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(MIN_DEADLINE_S)
    yield broker
    broker.stop()


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path / "data").start()
    yield gw
    assert gw.stop() == 0


def pushes(
    step: int, subscription_id: int = 1, who: tuple[str, ...] = (WATCHED, OTHER)
) -> pa.Table:
    now_ns = time.time_ns()
    table = landing_table(
        [
            Push(
                now_ns // 1000,
                instance,
                producer_payload(now_ns, step, brokers=(1,)),
                client_id="slow-app" if instance == WATCHED else "other-app",
            )
            for instance in who
        ]
    )
    ids = pa.array([subscription_id] * table.num_rows, table.schema.field("subscription_id").type)
    return table.set_column(table.schema.get_field_index("subscription_id"), "subscription_id", ids)


def test_watch_shows_the_matching_instance_from_the_topic(
    tansu: TansuProcess, gateway: GatewayProcess
) -> None:
    producer = Producer({"bootstrap.servers": tansu.bootstrap, "log_level": 3})
    produce(producer, TOPIC, pushes(step=1), partitions=[0, 1])  # before the watch: not shown
    proc = subprocess.Popen(
        [str(BIN / "clientmetrics"), "investigate", "watch", "--client-id", "slow-app",
         "--type", "producer", "--interval", "1s", "--duration", "120s",
         "--topic", TOPIC, "--topic-bootstrap-server", tansu.bootstrap,
         "--bootstrap-server", gateway.bootstrap],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdin is not None
    assert proc.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        wait_for(lambda: lines, 60, what="the watch to start")
        assert lines[0].startswith("watching investigate."), lines
        produce(producer, TOPIC, pushes(step=8), partitions=[1, 0])
        expected = len(GAUGES) + len(NODE_GAUGES) * 2 + 2  # node 1 and -1; two sums

        def shown() -> list[list[str]]:
            return [line.split() for line in lines if WATCHED in line]

        wait_for(lambda: len(shown()) >= expected, 60, what="the watched instance's points")
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        wait_for(lambda: any(line.startswith("deleted ") for line in lines), 60, what="deleted")
        produce(producer, TOPIC, pushes(step=9, subscription_id=2, who=(WATCHED,)))
        proc.stdin.close()
        proc.wait(60)  # stdout is the reader thread's alone
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else lines
    points = [words for words in shown() if words[3].startswith(PREFIX)]
    assert len(points) == expected, points
    by_metric = {(w[3], w[-1] if w[-1].startswith("node.id=") else None): w for w in points}
    for gauge in GAUGES:
        assert by_metric[(PREFIX + gauge, None)][4] == "4"  # step 8 * 0.5; step 1's 0.5 not shown
    latency = by_metric[(PREFIX + "node.request.latency.avg", "node.id=1")]
    assert latency[4:] == ["12", "ms", "node.id=1"]  # 10 + node 1 + 8 % 7
    assert all(w[2] == "slow-app" for w in points)
    assert not [line for line in lines if OTHER in line or "other-app" in line]
    assert f"back {WATCHED} subscription_id=2 (was 1)\n" in lines


def test_a_topic_that_does_not_exist_is_one_line(tansu: TansuProcess) -> None:
    done = subprocess.run(
        [str(BIN / "clientmetrics"), "investigate", "watch", "--client-id", "slow-app",
         "--topic", "no-such-topic", "--bootstrap-server", tansu.bootstrap],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "investigate: topic no-such-topic: Broker: Unknown topic or partition\n"


def test_find_reads_the_topic_when_there_is_no_landing_zone(
    tansu: TansuProcess, tmp_path: Path
) -> None:
    """``find`` in the command and in the dashboard, over the topic's records of the last
    15 minutes: a record from two hours ago (by its timestamp) is not looked at."""
    from clientmetrics.admin import AdminConfig
    from clientmetrics.dashboard import Dashboard, DashboardConfig
    from clientmetrics.dashboard.operators import OperatorConfig
    from tests.pipeline.topic_records import topic_records

    producer = Producer({"bootstrap.servers": tansu.bootstrap, "log_level": 3})
    two_hours_ago_ms = int(time.time() * 1000) - 2 * 3600 * 1000
    old = pushes(step=1, who=(OTHER,))
    at = old.schema.get_field_index("received_at")
    stamp = pa.array([two_hours_ago_ms * 1000], pa.int64()).cast(old.schema.field(at).type)
    for key, value, headers in topic_records(old.set_column(at, "received_at", stamp)):
        producer.produce(TOPIC, value, key, headers=headers, partition=0,
                         timestamp=two_hours_ago_ms)  # fmt: skip
    assert producer.flush(30) == 0
    produce(producer, TOPIC, pushes(step=2, subscription_id=7, who=(WATCHED,)), partitions=[1])
    done = subprocess.run(
        [str(BIN / "clientmetrics"), "investigate", "find", "--client-id-pattern", ".*-app",
         "--topic", TOPIC, "--topic-bootstrap-server", tansu.bootstrap, "--output", "json",
         "--data-dir", str(tmp_path / "none")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (hit,) = json.loads(done.stdout)
    assert (hit["client_instance_id"], hit["client_id"]) == (WATCHED, "slow-app")
    assert (hit["subscription_id"], hit["state"], hit["metric_types"]) == (
        7,
        "pushing",
        ["producer"],
    )

    operators = OperatorConfig(enabled=True, bootstrap_server=tansu.bootstrap, topic=TOPIC)
    dash = Dashboard(DashboardConfig(tmp_path), operators=operators)
    anonymous = dash.handle("/investigate?client_id=slow-app")
    assert (
        "log in to find clients (topic client-telemetry is read as you)" in anonymous.body.decode()
    )
    session = dash.investigate.sessions.create("op", AdminConfig.from_properties(tansu.bootstrap))
    page = dash.handle("/investigate?client_id=slow-app", cookie=f"cm_session={session.sid}")
    rows = re.findall(r"<tr class=hit>(.*?)</tr>", page.body.decode())
    (row,) = rows
    assert row.startswith(f"<td>{WATCHED}</td><td>slow-app</td>"), row

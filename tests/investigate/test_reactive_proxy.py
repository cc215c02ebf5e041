"""KIP-714's reactive monitoring, end to end in a terminal: the gateway as a proxy before Kafka 4.4.

Two real consumers share ``client.id`` ``lagging-consumer`` and the address
127.0.0.1: a Java consumer (kafka-clients 4.4) that spends a second on each
poll's result (slow processing in the application) and a healthy librdkafka
consumer that is always in ``poll``. The operator knows only the client id and
the address: ``find`` gives two instances, ``watch`` subscribes them to the
consumer metrics at a short interval and shows the slow one's
``poll.idle.ratio.avg`` near 0 against the other's near 1, ``narrow`` keeps one
instance, ``stop`` deletes the watch and both go back to the subscription they
pushed on before.

The proxy, not the standalone gateway: a consumer group needs a real broker (the
Java consumer's telemetry never starts against a gateway that answers
FindCoordinator with UNSUPPORTED_VERSION). Kafka runs without a telemetry plugin,
so every push lands at the proxy, whose landing zone the live view follows.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from peers.free_ports import free_port_block
from peers.kafka import KafkaBroker

from tests.investigate.terminal import CLIENT_ID, Lines, compare_then_narrow
from tests.kadmin import set_subscription
from tests.kafka import kafka_broker
from tests.peers.clients import java, requested_metrics
from tests.procs import BIN, GatewayProcess, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

BASELINE = {
    "metrics": "org.apache.kafka.consumer.connection.creation.",
    "interval.ms": "1000",
    "match": f"client_id={CLIENT_ID}",
}


def investigate(gateway: GatewayProcess, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / "clientmetrics"), "investigate", *args]
    command += ["--bootstrap-server", gateway.bootstrap]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def found(gateway: GatewayProcess) -> list[dict[str, object]]:
    result = investigate(
        gateway, "find", "--client-id", CLIENT_ID, "--source-address", "127.0.0.1",
        "--data-dir", str(gateway.data_dir), "--output", "json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    hits: list[dict[str, object]] = json.loads(result.stdout)
    return hits


@pytest.fixture(scope="module")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaBroker]:
    yield from kafka_broker(request, tmp_path_factory, plugins=())


@pytest.fixture
def gateway(kafka: KafkaBroker, tmp_path: Path) -> Iterator[GatewayProcess]:
    """The proxy (node 1 of the launcher's cluster); landing rolls each second."""
    gw = GatewayProcess(
        tmp_path / "data",
        "[exporters.landing]\nroll_seconds = 1\n",
        extra_args=("--upstream", kafka.bootstrap, "--broker-port-base", str(free_port_block(2))),
    ).start()
    # Before any client starts: a client told "nothing" waits its whole default
    # interval (minutes) before it asks again.
    set_subscription(gw.bootstrap, "baseline", BASELINE)
    yield gw
    assert gw.stop() == 0
    assert gw.tracebacks() == []


@pytest.fixture
def healthy(gateway: GatewayProcess) -> Iterator[None]:
    """A librdkafka consumer that is always in poll()."""
    consumer = Consumer(
        {
            "bootstrap.servers": gateway.bootstrap,
            "client.id": CLIENT_ID,
            "group.id": "lagging-group",
            "log_level": 0,
        }
    )
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            consumer.poll(0.5)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(10)
    consumer.close()


def find_both(gateway: GatewayProcess, slow: str) -> dict[str, dict[str, object]]:
    """find by client id and source address: the two consumers, on the baseline."""
    last: list[list[dict[str, object]]] = [[]]

    def two_found() -> bool:
        last[0] = found(gateway)
        return len(last[0]) == 2

    try:
        wait_for(two_found, 90, what="two instances found")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last found: {last[0]}") from None
    hits = {str(h["client_instance_id"]): h for h in last[0]}
    assert slow in hits
    (fast,) = set(hits) - {slow}
    assert "rdkafka" in str(hits[fast]["software"])
    assert all(h["subscriptions"] == ["baseline"] for h in hits.values())
    assert all(h["state"] == "pushing" for h in hits.values())
    assert hits[slow]["group"] == "lagging-group"  # the Java client's group.id attribute
    as_text = investigate(
        gateway, "find", "--client-id", CLIENT_ID, "--group", "lagging-group",
        "--data-dir", str(gateway.data_dir),
    ).stdout  # fmt: skip
    assert slow in as_text
    print(as_text)  # the session, for a reader of -s output
    return hits


def start_watch(gateway: GatewayProcess) -> tuple[Lines, str]:
    """``investigate watch`` on the client id and address; its output and the watch's name."""
    proc = subprocess.Popen(
        [str(BIN / "clientmetrics"), "investigate", "watch", "--bootstrap-server",
         gateway.bootstrap, "--data-dir", str(gateway.data_dir), "--client-id", CLIENT_ID,
         "--source-address", "127.0.0.1", "--interval", "1s", "--expires", "10m",
         "--owner", "operator"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    out = Lines(proc)
    started = out.until(lambda s: s.startswith("watching "), 30, "the watch")
    name = started.split()[1]
    assert re.fullmatch(r"investigate\.operator\.[0-9]{8}T[0-9]{6}Z\.[0-9a-f]{8}", name)
    listed = investigate(gateway, "list")
    (watch_line,) = [line for line in listed.stdout.splitlines() if name in line]
    assert "owner=operator" in watch_line
    return out, name


def test_find_watch_narrow_stop(gateway: GatewayProcess, healthy: None, tmp_path: Path) -> None:
    slow_args = ("--client-id", "lagging", "--role", "consumer", "--group", "lagging-group")
    slow_args += ("--messages", "0", "--process-ms", "1000")
    with java(gateway.bootstrap, tmp_path, *slow_args) as client:
        slow = client.instance_ids()["consumer"]
        hits = find_both(gateway, slow)
        (fast,) = set(hits) - {slow}
        before = {i: h["subscription_id"] for i, h in hits.items()}
        out, name = start_watch(gateway)
        try:
            compare_then_narrow(out, slow, fast)
            # The subscription itself is narrowed: another client of that id gets the baseline.
            assert requested_metrics(gateway.port, CLIENT_ID) == [BASELINE["metrics"]]

            out.send("stop")
            out.until(lambda s: s == f"deleted {name}", 30, "the delete")
            back = out.until(lambda s: s.startswith("back "), 60, "the client going back")
            assert back.split()[1:3] == [slow, f"subscription_id={before[slow]}"]
            assert out.proc.wait(30) == 0
            print("\n".join(out.seen))  # the session, for a reader of -s output
        finally:
            if out.proc.poll() is None:
                out.proc.kill()
                out.proc.wait()
        assert name not in investigate(gateway, "list").stdout

        def both_back() -> bool:
            now = {str(h["client_instance_id"]): h["subscription_id"] for h in found(gateway)}
            return now == before

        wait_for(both_back, 60, what="both consumers back on the baseline")

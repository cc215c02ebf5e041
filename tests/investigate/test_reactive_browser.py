"""KIP-714's reactive monitoring in a real browser, in each of the three ways in.

Headless Chromium (Playwright) drives the dashboard's investigate pages as an
operator would. Two real consumers share ``client.id`` ``lagging-consumer``
and the address 127.0.0.1: a Java consumer (kafka-clients 4.4) that spends a
second on each poll's result and a healthy librdkafka consumer. alice may alter
subscriptions, bob may not. Alice logs in, finds both by client id and address,
watches them (the consumer prefix the page proposes), sees the slow one's
``poll.idle.ratio.avg`` near 0 against the other's near 1, narrows to the slow
instance, stops, and sees both back on their previous subscription; bob's watch
is refused and the page says so in one line.

The ways in (one Kafka 4.4 for the module: SCRAM on SASL_PLAINTEXT with its
authorizer, PLAINTEXT beside it for clients and the proxy, the broker plugin on):

- ``proxy``: the gateway before Kafka, terminating SASL PLAIN, its
  ``[authorization]`` deciding; the live view and find read its landing zone.
- ``standalone``: the gateway alone, the clients' bootstrap. It has no group
  coordinator: the Java consumer runs the KIP-848 protocol
  (``group.protocol=consumer``), whose background thread pushes telemetry
  while the coordinator lookup fails (a classic consumer's telemetry never
  starts there); no records are consumed, the slow one's time between polls is
  the application's all the same.
- ``plugin``: Kafka itself answers the clients (PLAINTEXT), its plugin writes each
  push to a topic; operators log in to Kafka with SCRAM, its authorizer decides,
  and the dashboard finds and follows clients in the topic (``--topic``).

With ``UPDATE_SCREENSHOT=1`` the proxy run writes the screenshots docs/dashboard.md
shows to docs/img/.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, re-exported without `as`
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from peers.free_ports import free_port_block
from peers.kafka import KafkaBroker, clientmetrics_plugin

from clientmetrics.dashboard import Dashboard, DashboardConfig, DashboardServer
from clientmetrics.dashboard.operators import OperatorConfig
from clientmetrics.investigate.watches import instance_pattern
from tests.dashboard.browser import CHROMIUM, CHROMIUM_ARGS
from tests.investigate.terminal import CLIENT_ID, IDLE, Lines, compare_then_narrow
from tests.kadmin import set_subscription
from tests.kafka import kafka_broker
from tests.peers.clients import java
from tests.plain_flood import add_user
from tests.plugin.conftest import EVERY_LABEL
from tests.procs import BIN, MIN_DEADLINE_S, GatewayProcess, free_port, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

USERS = {"alice": "alice-pw", "bob": "bob-pw", "app": "app-pw"}
PLUGIN_TOPIC = "client-telemetry"
CONFIG = """
[exporters.landing]
roll_seconds = 1
[sasl]
mechanisms = ["PLAIN"]
[authorization]
super_users = ["User:alice"]
acls = [
  {principal = "User:bob", operation = "DESCRIBE_CONFIGS", permission = "allow"},
  {principal = "User:app", operation = "DESCRIBE_CONFIGS", permission = "allow"},
]
"""
BASELINE = {
    "metrics": "org.apache.kafka.consumer.connection.creation.",
    "interval.ms": "1000",
    "match": f"client_id={CLIENT_ID}",
}
SHOTS = Path(__file__).parents[2] / "docs" / "img" if os.environ.get("UPDATE_SCREENSHOT") else None
APP_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="app" '
    f'password="{USERS["app"]}";'
)


@dataclass
class Way:
    """One way in, as the test needs it: where clients go, as whom, and the dashboard."""

    name: str
    bootstrap: str
    #: librdkafka settings of the clients (their SASL login, if any).
    client_config: dict[str, str]
    #: The Java client's --property settings.
    java_properties: dict[str, str]
    dashboard: Callable[[], DashboardServer]
    #: ``clientmetrics investigate`` options: where it connects as alice ...
    connect: list[str]
    #: ... and where it reads the pushes.
    reads: list[str]
    stop: list[Callable[[], None]] = field(default_factory=list)


@pytest.fixture(scope="module")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaBroker]:
    """Kafka 4.4: SCRAM operators on SASL_PLAINTEXT (alice a super user), PLAINTEXT
    beside it (ANONYMOUS: the clients, the proxy), the plugin writing to PLUGIN_TOPIC."""
    plain_port = free_port()
    plugin = clientmetrics_plugin(
        {"bootstrap.servers": f"127.0.0.1:{plain_port}", "topic": PLUGIN_TOPIC,
         "labels": EVERY_LABEL, "linger.ms": "20"}
    )  # fmt: skip
    yield from kafka_broker(
        request, tmp_path_factory, listener="SASL_PLAINTEXT", users=USERS, authorizer=True,
        super_users=("User:admin", "User:alice"), also_plaintext=True, plaintext_port=plain_port,
        plugins=(plugin,),
    )  # fmt: skip


def plain(kafka: KafkaBroker) -> str:
    return f"127.0.0.1:{kafka.plaintext_port}"


def gateway_way(name: str, kafka: KafkaBroker | None, tmp_path: Path) -> Way:
    """The gateway terminating SASL PLAIN (a proxy before ``kafka``, else standalone)."""
    data = tmp_path / "data"
    for user, password in USERS.items():
        add_user(data, user, password)
    extra: tuple[str, ...] = ()
    if kafka is not None:
        extra = ("--upstream", plain(kafka), "--broker-port-base", str(free_port_block(2)))
    gw = GatewayProcess(data, CONFIG, listen_protocol="SASL_PLAINTEXT", extra_args=extra).start()

    def stop() -> None:
        assert gw.stop() == 0
        assert gw.tracebacks() == []

    set_subscription(
        gw.bootstrap, "baseline", BASELINE, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-pw",
    )  # fmt: skip
    operators = OperatorConfig(enabled=True, bootstrap_server=gw.bootstrap)
    alice = _command_config(tmp_path, "PLAIN", "plain.PlainLoginModule")
    sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    java_props = {**sasl, "sasl.jaas.config": APP_JAAS}
    if kafka is None:
        java_props["group.protocol"] = "consumer"
    return Way(
        name,
        gw.bootstrap,
        {**sasl, "sasl.username": "app", "sasl.password": USERS["app"]},
        java_props,
        lambda: DashboardServer(Dashboard(DashboardConfig(gw.data_dir), operators=operators)),
        ["--bootstrap-server", gw.bootstrap, "--command-config", str(alice)],
        ["--data-dir", str(gw.data_dir)],
        [stop],
    )


def plugin_way(kafka: KafkaBroker, tmp_path: Path) -> Way:
    """Kafka with its plugin: clients on PLAINTEXT, operators on SCRAM, the topic read."""
    admin = AdminClient({**kafka.client_config(), "log_level": 0})
    bob = [
        AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                   "User:bob", "*", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, PLUGIN_TOPIC, ResourcePatternType.LITERAL,
                   "User:bob", "*", AclOperation.READ, AclPermissionType.ALLOW),
    ]  # fmt: skip
    for future in admin.create_acls(bob).values():
        future.result(MIN_DEADLINE_S)
    set_subscription(plain(kafka), "baseline", BASELINE)
    operators = OperatorConfig(
        enabled=True, bootstrap_server=kafka.bootstrap, mechanism="SCRAM-SHA-512",
        topic=PLUGIN_TOPIC,
    )  # fmt: skip
    (tmp_path / "dash").mkdir()
    alice = _command_config(tmp_path, "SCRAM-SHA-512", "scram.ScramLoginModule")
    return Way(
        "plugin",
        plain(kafka),
        {},
        {},
        lambda: DashboardServer(Dashboard(DashboardConfig(tmp_path / "dash"), operators=operators)),
        ["--bootstrap-server", kafka.bootstrap, "--command-config", str(alice)],
        ["--topic", PLUGIN_TOPIC],
    )


def _command_config(tmp_path: Path, mechanism: str, module: str) -> Path:
    """alice's ``--command-config`` file (Java client properties)."""
    path = tmp_path / "alice.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism={mechanism}\n"
        f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
        f'username="alice" password="{USERS["alice"]}";\n'
    )
    return path


@pytest.fixture(params=["proxy", "standalone", "plugin"])
def way(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Way]:
    if request.param == "standalone":
        made = gateway_way("standalone", None, tmp_path)
    else:
        kafka = request.getfixturevalue("kafka")
        made = gateway_way("proxy", kafka, tmp_path) if request.param == "proxy" else (
            plugin_way(kafka, tmp_path)
        )  # fmt: skip
    yield made
    for stop in made.stop:
        stop()


@pytest.fixture
def healthy(way: Way) -> Iterator[None]:
    """A librdkafka consumer that is always in poll()."""
    consumer = Consumer(
        {
            "bootstrap.servers": way.bootstrap,
            "client.id": CLIENT_ID,
            "group.id": "lagging-group",
            "log_level": 0,
            **way.client_config,
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


@pytest.fixture
def dashboard(way: Way) -> Iterator[DashboardServer]:
    served = way.dashboard()
    served.start()
    yield served
    served.stop()


def shot(page: Any, way: Way, name: str, metric: str = "") -> None:
    """A screenshot for the docs (of the proxy's run), of the rows whose metric contains
    ``metric``."""
    if SHOTS and way.name == "proxy":
        if page.query_selector("#filter"):
            page.fill("#filter", metric)
        # The whole table, however wide its hits make it.
        width = max(1400, page.evaluate("() => document.documentElement.scrollWidth"))
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(SHOTS / f"{name}.png"))
        page.set_viewport_size({"width": 1400, "height": 900})


def log_in(page: Any, url: str, user: str) -> None:
    page.goto(f"{url}investigate")
    page.fill("#login input[name=username]", user)
    page.fill("#login input[name=password]", USERS[user])
    page.click("#login button")
    page.wait_for_selector(f"text=Logged in as {user}")


def find(page: Any, url: str, want: int, timeout_s: float = 90) -> dict[str, list[str]]:
    """Find by client id and address until ``want`` hits show; their rows by instance."""
    deadline = time.monotonic() + timeout_s
    rows: dict[str, list[str]] = {}
    while time.monotonic() < deadline:
        page.goto(f"{url}investigate")
        page.fill("#find input[name=client_id]", CLIENT_ID)
        page.fill("#find input[name=source_address]", "127.0.0.1")
        page.click("#find button")
        cells = page.eval_on_selector_all(
            "#hits tr.hit", "rs => rs.map(r => [...r.children].map(c => c.textContent))"
        )
        rows = {row[0]: row for row in cells}
        if len(rows) == want and all(r[6] == "pushing" for r in rows.values()):
            return rows
        page.wait_for_timeout(1000)
    raise AssertionError(f"not {want} pushing hits within {timeout_s}s: {rows}")


def idle_values(page: Any) -> dict[str, float]:
    """The latest poll.idle.ratio.avg shown per instance."""
    cells = page.eval_on_selector_all(
        f'#points tr[data-metric="{IDLE}"]',
        "rs => rs.map(r => [r.dataset.instance, r.children[2].textContent])",
    )
    return {instance: float(value) for instance, value in cells}


def wait_idle(page: Any, instances: list[str]) -> dict[str, float]:
    page.wait_for_function(
        "([m, ids]) => ids.every(i => document.querySelector("
        "`#points tr[data-metric='${m}'][data-instance='${i}']`))",
        arg=[IDLE, instances],
        timeout=90_000,
    )
    return idle_values(page)


def test_reactive_example_in_the_browser(
    dashboard: DashboardServer, healthy: None, way: Way, tmp_path: Path
) -> None:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium: apt-get install -y chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    url = dashboard.url
    with (
        java(way.bootstrap, tmp_path, *slow_consumer(way)) as client,
        sync_api.sync_playwright() as playwright,
    ):
        slow = client.instance_ids()["consumer"]
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            refused(page, url, way)
            log_in(page, url, "alice")
            hits = find(page, url, 2)
            shot(page, way, "investigate-find")
            assert slow in hits
            (fast,) = set(hits) - {slow}
            assert "rdkafka" in hits[fast][2]
            assert {h[10] for h in hits.values()} == {"baseline"}
            # The baseline's two metrics; its id too, where records carry one (the plugin's
            # do not: there the metric names tell one subscription's pushes from another's).
            before = {i: (h[9], h[11]) for i, h in hits.items()}
            assert {metrics for _, metrics in before.values()} == {"2"}, before
            watch_narrow_stop(page, way, slow, fast, before[slow][0])
            # Both are back on the subscription they pushed on before.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                now = {i: (h[9], h[11]) for i, h in find(page, url, 2).items()}
                if now == before:
                    break
                page.wait_for_timeout(1000)
            assert now == before
        finally:
            browser.close()


def slow_consumer(way: Way) -> tuple[str, ...]:
    """The Java peer's arguments: a consumer that spends a second on each poll's result."""
    args = ("--client-id", "lagging", "--role", "consumer", "--group", "lagging-group")
    args += ("--messages", "0", "--process-ms", "1000")
    for key, value in way.java_properties.items():
        args += ("--property", f"{key}={value}")
    return args


def refused(page: Any, url: str, way: Way) -> None:
    """bob may find clients but not watch them: the gateway's or Kafka's refusal is one
    line on the page."""
    log_in(page, url, "bob")
    find(page, url, 2)
    page.fill("#watch input[name=interval_s]", "1")
    page.click("#watch button")
    line = page.text_content("#refusal")
    assert line == "investigate: CLUSTER_AUTHORIZATION_FAILED (31): Cluster authorization failed."
    shot(page, way, "investigate-refused")
    page.goto(f"{url}investigate")
    page.click("#logout button")
    page.wait_for_selector("#login")


def watch_narrow_stop(page: Any, way: Way, slow: str, fast: str, slow_before: str) -> None:
    # The consumer prefix is proposed (the hits push consumer metrics); 1 s to run quickly.
    assert page.input_value("#watch input[name=metrics]") == "org.apache.kafka.consumer."
    assert page.input_value("#watch input[name=expires_min]") == "30"
    page.fill("#watch input[name=interval_s]", "1")
    page.click("#watch button")
    page.wait_for_url(re.compile(r".*/investigate/watch/investigate\.alice\..*"))
    ratios = wait_idle(page, [slow, fast])
    page.wait_for_timeout(3000)  # a few pushes more, then the latest values shown
    ratios = idle_values(page)
    assert ratios[slow] < 0.3, ratios
    assert ratios[fast] > 0.7, ratios
    units = page.eval_on_selector_all(
        "#points tbody tr",
        "rs => rs.map(r => [r.children[3].textContent, r.children[4].textContent])",
    )
    assert any(node.startswith("node.id=") for _, node in units)
    assert any(unit for unit, _ in units)
    shot(page, way, "investigate-live", "poll.idle.ratio")

    page.fill("#narrow input[name=instance]", slow)
    page.click("#narrow button")
    # Kafka's form of the id (base64url): the one a broker's matcher tries.
    page.wait_for_selector(f"#match:has-text('client_instance_id={instance_pattern(slow)}')")
    seq = page.evaluate("() => window.lastSeq ?? -1")
    page.wait_for_function(f"() => (window.lastSeq ?? -1) > {seq} + 50", timeout=60_000)
    shown = set(
        page.eval_on_selector_all("#points tbody tr", "rs => rs.map(r => r.dataset.instance)")
    )
    assert shown == {slow}
    shot(page, way, "investigate-narrowed", "node.request.latency")
    page.fill("#filter", "")

    page.click("#stop button")
    page.wait_for_selector("#state:has-text('stopped')")
    back = page.wait_for_selector("li.back", timeout=60_000).text_content()
    if way.name == "plugin":  # no subscription ids in its records: the baseline's 2 metrics
        assert re.fullmatch(
            f"{slow} back on its previous metrics: 2 \\(was [0-9]+ watched\\)", back
        )
    else:
        assert back.startswith(f"{slow} back on subscription_id={slow_before} ")
    shot(page, way, "investigate-stopped", "poll.idle.ratio")


def investigate(way: Way, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / "clientmetrics"), "investigate", *args, *way.connect]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def found(way: Way) -> dict[str, dict[str, object]]:
    """``investigate find`` by client id and address: the hits by instance."""
    result = investigate(
        way, "find", "--client-id", CLIENT_ID, "--source-address", "127.0.0.1",
        *way.reads, "--output", "json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return {str(h["client_instance_id"]): h for h in json.loads(result.stdout)}


@pytest.mark.parametrize("way", ["standalone", "plugin"], indirect=True)
def test_reactive_example_in_a_terminal(healthy: None, way: Way, tmp_path: Path) -> None:
    """The same example through ``clientmetrics investigate``, as alice. (Through the proxy
    it is ``test_reactive_proxy.py``, before a Kafka of its own.)"""
    with java(way.bootstrap, tmp_path, *slow_consumer(way)) as client:
        slow = client.instance_ids()["consumer"]
        hits: dict[str, dict[str, object]] = {}

        def both_pushing() -> bool:
            # The module's earlier runs left silent instances of this client id in the
            # topic: the two of this run are the pushing ones.
            hits.clear()
            hits.update({i: h for i, h in found(way).items() if h["state"] == "pushing"})
            return slow in hits and len(hits) == 2

        wait_for(both_pushing, 90, what="two pushing instances found")
        (fast,) = set(hits) - {slow}
        assert "rdkafka" in str(hits[fast]["software"])
        before = {i: (h["subscription_id"], h["last_push_metrics"]) for i, h in hits.items()}
        assert {metrics for _, metrics in before.values()} == {2}, before  # the baseline's
        proc = subprocess.Popen(
            [str(BIN / "clientmetrics"), "investigate", "watch", *way.connect, *way.reads,
             "--client-id", CLIENT_ID, "--source-address", "127.0.0.1", "--interval", "1s",
             "--expires", "10m"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        out = Lines(proc)
        try:
            name = out.until(lambda s: s.startswith("watching "), 60, "the watch").split()[1]
            assert re.fullmatch(r"investigate\.alice\.[0-9]{8}T[0-9]{6}Z\.[0-9a-f]{8}", name)
            assert name in investigate(way, "list").stdout
            compare_then_narrow(out, slow, fast)

            out.send("stop")
            out.until(lambda s: s == f"deleted {name}", 30, "the delete")
            back = out.until(lambda s: s.startswith("back "), 60, "the client going back")
            assert back.split()[1] == slow, back
            assert proc.wait(30) == 0
            # Both on the subscription they pushed on before: its id where records carry
            # one, its two metrics in every way (the plugin's records carry no id).

            def both_back() -> bool:
                now = {i: (h["subscription_id"], h["last_push_metrics"]) for i, h in
                       found(way).items() if i in before}  # fmt: skip
                return now == before

            wait_for(both_back, 60, what="both clients back on the baseline")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            print("\n".join(out.seen))  # the session, for a reader of -s output
        assert name not in investigate(way, "list").stdout

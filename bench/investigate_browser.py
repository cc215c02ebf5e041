"""Push acknowledged -> point on screen, in the dashboard's live view in headless Chromium.

``--clients`` simulated clients each push one gauge (its push number) every
``--interval-ms``, through one of the three ways in (``--way``):

- ``standalone`` (the default): a standalone gateway (landing exporter); the
  dashboard reads its landing zone.
- ``proxy``: Apache Kafka 4.4 (one node, PLAINTEXT) with the gateway in proxy
  mode before it (``--upstream``, ``--broker-port-base``); the clients push
  through the proxy, the dashboard reads the gateway's landing zone.
- ``plugin``: Apache Kafka 4.4 with the project's broker plugin, writing each
  push to the topic ``client-telemetry`` on the same broker (``--plugin-set
  KEY=VALUE`` sets a plugin setting, e.g. ``linger.ms=20``; docs/kafka-plugin.md);
  the clients push straight to Kafka, the dashboard follows the topic
  (``--topic``).

The dashboard (write actions on) serves the investigate pages; Chromium, driven
by Playwright, finds the clients, creates a watch through the page's form and
opens its live view. A MutationObserver in the page notes when each pushed
number appears in its row; a push's latency runs from the moment its
acknowledgement reached the client to that moment (one machine, one wall
clock). Prints p50 / p90 / p99 / max over the points (the aim is 2 s at most),
the clients' refused requests by error code, and the 1-minute load average
while the points were measured.

The operator's session is made in the dashboard's store directly (no listener
here has SASL); everything after is the page's own doing.

    python bench/investigate_browser.py --pushes 200
    python bench/investigate_browser.py --way proxy --pushes 100
    python bench/investigate_browser.py --way plugin --pushes 100
    python bench/investigate_browser.py --way plugin --pushes 100 --plugin-set linger.ms=20
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from clientmetrics.admin import AdminConfig, alter, subscription_configs
from clientmetrics.dashboard import Dashboard, DashboardConfig, DashboardServer
from clientmetrics.dashboard.operators import OperatorConfig
from clientmetrics.logs import configure_logging
from clientmetrics.reporter.protocol import (
    get_request,
    get_response_event,
    push_request,
    telemetry_version,
)
from clientmetrics.reporter.sim_net import open_connection
from clientmetrics.telemetry.client_state import SubscriptionReceived
from clientmetrics.wire import ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from peers.free_ports import free_port
from peers.kafka import KafkaBroker
from tests.dashboard.browser import CHROMIUM, CHROMIUM_ARGS
from tests.kafka import plugin_to_itself, proxy_gateway
from tests.procs import GatewayProcess
from tests.pushers import METRIC, payload

WAYS = ("standalone", "proxy", "plugin")
CLIENT_ID = "bench-browser"
#: The plugin's topic (``plugin`` way), on the broker the clients push to.
TOPIC = "client-telemetry"
#: Push errors after which a client asks for its subscription again at once (Kafka's
#: clients do); after any other error it waits its push interval first.
REFETCH_AT_ONCE = (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
OBSERVE = """() => { window.__shown = [];
  new MutationObserver(ms => { const t = Date.now();
    for (const m of ms) { const td = m.target;
      if (td.parentElement && td.parentElement.children[2] === td)
        window.__shown.push([td.parentElement.dataset.instance, td.textContent, t]); } })
  .observe(document.querySelector('#points tbody'), {childList: true, subtree: true}); }"""


@dataclass(frozen=True)
class Served:
    """One way in, running: where clients push, where subscriptions change, what the
    dashboard reads."""

    #: The clients' bootstrap, also the operators' (subscriptions, the session).
    bootstrap: str
    port: int
    #: The dashboard's data directory (a landing zone, or empty with a topic).
    data_dir: Path
    operators: OperatorConfig
    summary: str


@contextlib.contextmanager
def serve(way: str, work: Path, plugin_settings: dict[str, str]) -> Iterator[Served]:
    """Start ``way``'s servers in ``work``; stop them on exit."""
    if way == "standalone":
        gw = GatewayProcess(work / "data").start()
        try:
            operators = OperatorConfig(enabled=True, bootstrap_server=gw.bootstrap)
            yield Served(gw.bootstrap, gw.port, gw.data_dir, operators, "standalone gateway")
        finally:
            gw.stop()
        return
    port = free_port()
    # The proxy's upstream needs no telemetry plugin: the gateway answers 71 and 72.
    plugins = [plugin_to_itself(port, TOPIC, plugin_settings)] if way == "plugin" else []
    broker = KafkaBroker(work / "kafka", port=port, plugins=plugins).start()
    try:
        print(broker.summary())
        if way == "proxy":
            with contextlib.contextmanager(proxy_gateway)(broker, work / "data") as gw:
                operators = OperatorConfig(enabled=True, bootstrap_server=gw.bootstrap)
                summary = f"gateway as a proxy at {gw.bootstrap} before Kafka 4.4"
                yield Served(gw.bootstrap, gw.port, gw.data_dir, operators, summary)
        else:
            (work / "dash").mkdir()
            operators = OperatorConfig(enabled=True, bootstrap_server=broker.bootstrap, topic=TOPIC)
            settings = ", ".join(f"{k}={v}" for k, v in plugin_settings.items()) or "defaults"
            summary = f"Kafka 4.4 with the broker plugin (topic {TOPIC}; {settings})"
            yield Served(broker.bootstrap, broker.port, work / "dash", operators, summary)
    finally:
        broker.stop()


@dataclass
class Fleet:
    """What the clients saw: when each counted push was acknowledged, refusals by code."""

    acked: dict[tuple[str, int], float]
    refused: Counter[str]
    go: threading.Event


async def client(port: int, n: int, interval_s: float, fleet: Fleet) -> None:
    """Push numbered gauges; after ``go``, note when each acknowledgement arrived (n of them).

    As Kafka's clients do (Kafka throttles a Get or a push that comes early): a refused
    Get is asked again after the interval; a refused push is followed by a new Get, at
    once after UNKNOWN_SUBSCRIPTION_ID (the subscriptions changed), else after the
    interval; only the first Get is followed by a push at once.
    """
    instance = uuid.uuid4()
    conn = await open_connection("127.0.0.1", port, CLIENT_ID)
    version = telemetry_version(conn.api_versions)
    if version is None:
        raise RuntimeError(f"127.0.0.1:{port} offers no telemetry: {sorted(conn.api_versions)}")
    seq, counted = 0, 0
    sub_id = None
    first = True
    while counted < n:
        if sub_id is None:
            get = get_request(version, conn.next_correlation_id(), conn.client_id, instance)
            event = get_response_event(await conn.call(*get))
            if not isinstance(event, SubscriptionReceived):
                fleet.refused[f"get {code_name(event.error_code)}"] += 1
                await asyncio.sleep(interval_s)
                continue
            sub_id = event.subscription.subscription_id
            if not first:
                await asyncio.sleep(interval_s)
            first = False
        seq += 1
        push = push_request(
            version, conn.next_correlation_id(), conn.client_id, instance,
            subscription_id=sub_id, terminating=False, compression_type=0, metrics=payload(seq),
        )  # fmt: skip
        answer = await conn.call(*push)
        code = int(answer.error_code)
        if code != 0:
            fleet.refused[f"push {code_name(code)}"] += 1
            sub_id = None
            if code not in REFETCH_AT_ONCE:
                await asyncio.sleep(interval_s)
            continue
        if fleet.go.is_set():
            fleet.acked[(str(instance), seq)] = time.time()
            counted += 1
        await asyncio.sleep(interval_s)
    conn.close()


def code_name(code: int) -> str:
    try:
        return f"{ErrorCode(code).name} ({code})"
    except ValueError:
        return str(code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--way", choices=WAYS, default="standalone")
    parser.add_argument("--pushes", type=int, default=200, help="Points measured in all.")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument(
        "--plugin-set", action="append", default=[], metavar="KEY=VALUE",
        help="A broker plugin setting (--way plugin), without 'clientmetrics.'.",
    )  # fmt: skip
    args = parser.parse_args()
    if args.plugin_set and args.way != "plugin":
        parser.error("--plugin-set is for --way plugin")
    if any("=" not in item for item in args.plugin_set):
        parser.error("--plugin-set takes KEY=VALUE")
    plugin_settings = dict(item.split("=", 1) for item in args.plugin_set)
    configure_logging("warning", "console")
    fleet = Fleet({}, Counter(), threading.Event())
    with tempfile.TemporaryDirectory() as tmp, serve(args.way, Path(tmp), plugin_settings) as way:
        print(f"way: {args.way}: {way.summary}")
        dash = Dashboard(DashboardConfig(way.data_dir), operators=way.operators)
        server = DashboardServer(dash)
        server.start()
        try:
            alter(way.bootstrap, "bench", subscription_configs(metrics=["*"], interval_ms=1000))
            per_client = -(-args.pushes // args.clients)

            async def pushing() -> None:
                await asyncio.gather(
                    *(
                        client(way.port, per_client, args.interval_ms / 1000, fleet)
                        for _ in range(args.clients)
                    )
                )

            pushers = threading.Thread(target=lambda: asyncio.run(pushing()))
            pushers.start()
            shown, loads = browse(server.url, dash, way.bootstrap, fleet, pushers)
        finally:
            server.stop()
    report(fleet, shown, loads)


def browse(
    url: str, dash: Dashboard, bootstrap: str, fleet: Fleet, pushers: threading.Thread
) -> tuple[dict[tuple[str, int], float], list[float]]:
    """Find, watch, observe the live view until the pushers are done: when each value
    showed, and the load average (1 min) every second meanwhile."""
    session = dash.investigate.sessions.create("bench", AdminConfig.from_properties(bootstrap))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context()
        context.add_cookies([{"name": "cm_session", "value": session.sid, "url": url}])
        page = context.new_page()
        # A topic is found once the plugin made it and wrote the first pushes; Kafka
        # and the find page's first read of it take longer than a landing zone.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            page.goto(f"{url}investigate?client_id={CLIENT_ID}")
            if page.query_selector("#watch"):
                break
            page.wait_for_timeout(500)
        page.fill("#watch input[name=metrics]", METRIC)
        page.fill("#watch input[name=interval_s]", "1")
        page.click("#watch button")
        page.wait_for_url("**/investigate/watch/**")
        page.evaluate(OBSERVE)
        fleet.go.set()
        loads = []
        while pushers.is_alive():
            loads.append(os.getloadavg()[0])
            pushers.join(1.0)
        rows = shown_rows(page, fleet)
        browser.close()
    shown: dict[tuple[str, int], float] = {}
    for instance, text, at_ms in rows:
        shown.setdefault((instance, int(float(text))), at_ms / 1000)
    return shown, loads


def shown_rows(page: Page, fleet: Fleet, wait_s: float = 15.0) -> list[tuple[str, str, float]]:
    """The observer's rows once every acknowledged push is on screen, or after ``wait_s``
    (a point still missing then counts as never shown)."""
    deadline = time.monotonic() + wait_s
    while True:
        rows = [
            (str(i), str(text), float(t)) for i, text, t in page.evaluate("() => window.__shown")
        ]
        seen = {(i, int(float(text))) for i, text, _ in rows}
        if set(fleet.acked) <= seen or time.monotonic() > deadline:
            return rows
        page.wait_for_timeout(250)


def report(fleet: Fleet, shown: dict[tuple[str, int], float], loads: list[float]) -> None:
    acked = fleet.acked
    delays = sorted(max(0.0, shown[k] - acked[k]) * 1000 for k in acked if k in shown)
    missing = len(set(acked) - set(shown))
    if fleet.refused:
        print("refused:", ", ".join(f"{what} x{n}" for what, n in sorted(fleet.refused.items())))
    if loads:
        print(
            f"load average (1 min) while measured: mean {statistics.mean(loads):.1f}, "
            f"max {max(loads):.1f}"
        )
    if not delays:
        print(f"no point shown of {len(acked)} acknowledged")
        return

    def pct(q: float) -> float:
        return delays[min(len(delays) - 1, int(len(delays) * q))]

    print(f"points: {len(delays)} on screen of {len(acked)} acknowledged ({missing} never shown)")
    print(
        f"push acknowledged -> on screen: p50 {statistics.median(delays):.0f} ms, "
        f"p90 {pct(0.9):.0f} ms, p99 {pct(0.99):.0f} ms, max {delays[-1]:.0f} ms"
    )


if __name__ == "__main__":
    main()

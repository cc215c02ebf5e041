"""Push acknowledged -> point on screen, in the dashboard's live view in headless Chromium.

A standalone gateway (landing exporter) and ``--clients`` simulated clients,
each pushing one gauge (its push number) every ``--interval-ms``. The
dashboard (write actions on) serves the investigate pages; Chromium, driven by
Playwright, finds the clients, creates a watch through the page's form and
opens its live view. A MutationObserver in the page notes when each pushed
number appears in its row; a push's latency runs from the moment its
acknowledgement reached the client to that moment (one machine, one wall
clock). Prints p50 / p90 / p99 / max over the points (the aim is 2 s at most).

The operator's session is made in the dashboard's store directly (this gateway
has no SASL listener); everything after is the page's own doing.

    python bench/investigate_browser.py --pushes 200
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from playwright.sync_api import sync_playwright

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.dashboard.browser import CHROMIUM, CHROMIUM_ARGS
from tests.procs import GatewayProcess
from tests.pushers import METRIC, payload

CLIENT_ID = "bench-browser"
OBSERVE = """() => { window.__shown = [];
  new MutationObserver(ms => { const t = Date.now();
    for (const m of ms) { const td = m.target;
      if (td.parentElement && td.parentElement.children[2] === td)
        window.__shown.push([td.parentElement.dataset.instance, td.textContent, t]); } })
  .observe(document.querySelector('#points tbody'), {childList: true, subtree: true}); }"""


async def client(
    port: int, n: int, interval_s: float, acked: dict[tuple[str, int], float], go: threading.Event
) -> None:
    """Push numbered gauges; after ``go``, note when each acknowledgement arrived (n of them).

    A push refused because the subscriptions changed (the watch) is followed by a
    new Get, as a real client does.
    """
    instance = uuid.uuid4()
    conn = await open_connection("127.0.0.1", port, CLIENT_ID)
    version = telemetry_version(conn.api_versions) or 0
    seq, counted = 0, 0
    sub_id = None
    while counted < n:
        if sub_id is None:
            get = get_request(version, conn.next_correlation_id(), conn.client_id, instance)
            event = get_response_event(await conn.call(*get))
            assert isinstance(event, SubscriptionReceived), event
            sub_id = event.subscription.subscription_id
        seq += 1
        push = push_request(
            version, conn.next_correlation_id(), conn.client_id, instance,
            subscription_id=sub_id, terminating=False, compression_type=0, metrics=payload(seq),
        )  # fmt: skip
        answer = await conn.call(*push)
        if int(answer.error_code) != 0:
            sub_id = None
            continue
        if go.is_set():
            acked[(str(instance), seq)] = time.time()
            counted += 1
        await asyncio.sleep(interval_s)
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pushes", type=int, default=200, help="Points measured in all.")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--interval-ms", type=int, default=1000)
    args = parser.parse_args()
    configure_logging("warning", "console")
    acked: dict[tuple[str, int], float] = {}
    go = threading.Event()
    with tempfile.TemporaryDirectory() as tmp:
        gw = GatewayProcess(Path(tmp) / "data").start()
        operators = OperatorConfig(enabled=True, bootstrap_server=gw.bootstrap)
        dash = Dashboard(DashboardConfig(gw.data_dir), operators=operators)
        server = DashboardServer(dash)
        server.start()
        try:
            alter(gw.bootstrap, "bench", subscription_configs(metrics=["*"], interval_ms=1000))
            per_client = -(-args.pushes // args.clients)

            async def fleet() -> None:
                await asyncio.gather(
                    *(
                        client(gw.port, per_client, args.interval_ms / 1000, acked, go)
                        for _ in range(args.clients)
                    )
                )

            pushers = threading.Thread(target=lambda: asyncio.run(fleet()))
            pushers.start()
            shown = browse(server.url, dash, gw.bootstrap, go, pushers)
        finally:
            server.stop()
            gw.stop()
    report(acked, shown)


def browse(
    url: str, dash: Dashboard, bootstrap: str, go: threading.Event, pushers: threading.Thread
) -> dict[tuple[str, int], float]:
    """Find, watch, observe the live view until the pushers are done; when each value showed."""
    session = dash.investigate.sessions.create("bench", AdminConfig.from_properties(bootstrap))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context()
        context.add_cookies([{"name": "cm_session", "value": session.sid, "url": url}])
        page = context.new_page()
        deadline = time.monotonic() + 60
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
        go.set()
        pushers.join()
        page.wait_for_timeout(3000)  # the last pushes' points
        rows = page.evaluate("() => window.__shown")
        browser.close()
    shown: dict[tuple[str, int], float] = {}
    for instance, text, at_ms in rows:
        shown.setdefault((instance, int(float(text))), at_ms / 1000)
    return shown


def report(acked: dict[tuple[str, int], float], shown: dict[tuple[str, int], float]) -> None:
    delays = sorted(max(0.0, shown[k] - acked[k]) * 1000 for k in acked if k in shown)
    missing = len(set(acked) - set(shown))
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

"""Push acknowledged -> point shown, for ``clientmetrics investigate watch``'s live view.

A standalone gateway (landing exporter, its default roll) and ``--clients``
simulated clients, each pushing one gauge (its push number) every
``--interval-ms``. A watcher runs what ``investigate watch`` runs (the landing
tail and ``live_points``, polled every ``session.POLL_S``) and notes when each
push's point is first shown; a push's latency is from the moment its
acknowledgement reached the client to that moment (same clock: one process).
Prints p50 / p99 / max over ``--pushes`` points (the aim is 2 s at most).

    python bench/investigate_live.py --pushes 200
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

from clientmetrics.admin import alter, subscription_configs
from clientmetrics.investigate.live import Selection, live_points, warm_up
from clientmetrics.investigate.session import POLL_S
from clientmetrics.investigate.tail import LandingTail
from clientmetrics.reporter.protocol import (
    get_request,
    get_response_event,
    push_request,
    telemetry_version,
)
from clientmetrics.reporter.sim_net import open_connection
from clientmetrics.telemetry.client_state import SubscriptionReceived

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.procs import GatewayProcess
from tests.pushers import METRIC, payload


async def client(port: int, n: int, interval_s: float, acked: dict[tuple[str, int], float]) -> None:
    """Push ``n`` numbered gauges; note when each acknowledgement arrived."""
    instance = uuid.uuid4()
    conn = await open_connection("127.0.0.1", port, "bench-live")
    version = telemetry_version(conn.api_versions) or 0
    get = get_request(version, conn.next_correlation_id(), conn.client_id, instance)
    event = get_response_event(await conn.call(*get))
    assert isinstance(event, SubscriptionReceived), event
    for seq in range(1, n + 1):
        push = push_request(
            version, conn.next_correlation_id(), conn.client_id, instance,
            subscription_id=event.subscription.subscription_id, terminating=False,
            compression_type=0, metrics=payload(seq),
        )  # fmt: skip
        answer = await conn.call(*push)
        if int(answer.error_code) == 0:
            acked[(str(instance), seq)] = time.time()
        await asyncio.sleep(interval_s)
    conn.close()


def watch(tail: LandingTail, shown: dict[tuple[str, int], float], stop: threading.Event) -> None:
    """What ``investigate watch`` does between polls, noting when each point is shown."""
    selection = Selection({"client_id": "bench-live"}, (METRIC,))
    while not stop.is_set():
        for point in live_points(tail.read(), selection):
            assert point.value is not None
            shown.setdefault((point.client_instance_id, int(point.value)), time.time())
        stop.wait(POLL_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pushes", type=int, default=200, help="Points measured in all.")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--interval-ms", type=int, default=250)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        gw = GatewayProcess(Path(tmp) / "data").start()
        try:
            configs = subscription_configs(metrics=["*"], interval_ms=args.interval_ms)
            alter(gw.bootstrap, "bench", configs)
            acked: dict[tuple[str, int], float] = {}
            shown: dict[tuple[str, int], float] = {}
            stop = threading.Event()
            warm_up()  # as the session does before it creates its watch and its tail
            tail = LandingTail(gw.data_dir)
            watcher = threading.Thread(target=watch, args=(tail, shown, stop))
            watcher.start()
            per_client = -(-args.pushes // args.clients)
            interval = args.interval_ms / 1000

            async def fleet() -> None:
                await asyncio.gather(
                    *(client(gw.port, per_client, interval, acked) for _ in range(args.clients))
                )

            asyncio.run(fleet())
            deadline = time.monotonic() + 30
            while set(acked) - set(shown) and time.monotonic() < deadline:
                time.sleep(0.1)
            stop.set()
            watcher.join()
        finally:
            gw.stop()
    delays = sorted(max(0.0, shown[k] - acked[k]) * 1000 for k in acked if k in shown)
    lost = sorted(set(acked) - set(shown), key=lambda k: acked[k])
    missing = len(lost)
    if lost:
        first = min(acked.values())
        when = ", ".join(f"{acked[k] - first:.1f}" for k in lost[:20])
        print(f"never shown, acknowledged at (s after the first): {when}")

    def pct(q: float) -> float:
        return delays[min(len(delays) - 1, int(len(delays) * q))]

    print(f"points: {len(delays)} shown of {len(acked)} acknowledged ({missing} never shown)")
    print(
        f"push acknowledged -> shown: p50 {statistics.median(delays):.0f} ms, p90 {pct(0.9):.0f} "
        f"ms, p99 {pct(0.99):.0f} ms, max {delays[-1]:.0f} ms (poll every {POLL_S * 1000:.0f} ms)"
    )


if __name__ == "__main__":
    main()

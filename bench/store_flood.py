"""Benchmark: GetTelemetrySubscriptions latency while the topic store is flooded.

    .venv/bin/python bench/store_flood.py [--records 3000] [--signed] [--seconds 3]

Starts Tansu and two gateways in proxy mode in front of it sharing the topic
store (``--signed``: with a shared ``subscriptions_key_file``, so the flood is
forged and refused whole; else unsigned, so the cap of 1,000 decides). Each
gateway gets a stream of Gets (a new connection each, one at a time) for the
whole run. Phases:

1. quiet: ``--seconds`` of Gets with nothing else happening;
2. flood: ``--records`` distinct subscriptions plus one poison record (200 KB
   of nesting) written straight to the topic, then an alter of an existing
   subscription through the first gateway; the phase ends when the second
   gateway describes the alter (so it has read past the whole flood);
3. restart: the second gateway stopped and started again with all of that on
   the topic (seconds to ``gateway_started``).

Prints, per phase and gateway, the Gets answered and their p50, p99 and max
latency in ms, and the flood phase's and the restart's seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the gateway and Tansu helpers are the tests'

from kafka.errors import KafkaError  # noqa: E402
from tests.hostile_store import POISON, GetProbe, flood, produce  # noqa: E402
from tests.kadmin import describe_subscription, set_subscription  # noqa: E402
from tests.procs import TansuProcess  # noqa: E402
from tests.proxy.conftest import FAST_LANDING, ProxyGateway, start_proxy  # noqa: E402

TOPIC = "__client_metrics_subscriptions"


def figures(latencies: list[float]) -> str:
    if len(latencies) < 2:
        return f"{len(latencies)} Gets"
    ms = sorted(x * 1000 for x in latencies)
    p99 = statistics.quantiles(ms, n=100, method="inclusive")[98]
    return (
        f"{len(ms):5d} Gets  p50 {statistics.median(ms):6.1f}  p99 {p99:6.1f}  max {ms[-1]:7.1f} ms"
    )


def wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def alter_until_answered(bootstrap: str) -> None:
    """Alter "good" through the gateway, again while its answer times out (a held loop)."""
    deadline = time.monotonic() + 600
    while True:
        try:
            set_subscription(bootstrap, "good", {"metrics": "org.apache.kafka.done."})
            return
        except KafkaError as exc:
            print(f"  alter after the flood: {exc}")
            if time.monotonic() > deadline:
                raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--signed", action="store_true")
    parser.add_argument(
        "--no-poison",
        action="store_true",
        help="flood only (the follower of older versions died on it)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        work = Path(tmp)
        tansu = TansuProcess(log_path=work / "tansu.log").start()
        stack.callback(tansu.stop)
        extra: tuple[str, ...] = ()
        if args.signed:
            key = work / "key"
            key.write_text(os.urandom(32).hex() + "\n")
            key.chmod(0o600)
            extra = ("--config", str(work / "signed.toml"))
            (work / "signed.toml").write_text(
                FAST_LANDING.replace(
                    "[gateway]\n", f"[gateway]\nsubscriptions_key_file = '{key}'\n"
                )
            )
        gateways: list[ProxyGateway] = []
        for name in ("first", "second"):
            gw = start_proxy(work / name, tansu.bootstrap, *extra)
            stack.callback(gw.stop)
            gateways.append(gw)
        first, second = gateways
        set_subscription(first.bootstrap, "good", {"metrics": "org.apache.kafka.a."})
        wait(lambda: "kafka.a." in str(describe_subscription(second.bootstrap, "good")), 30, "good")

        probes = [stack.enter_context(GetProbe(gw.port, every_s=0.002)) for gw in gateways]
        time.sleep(args.seconds)
        marks = [len(p.latencies) for p in probes]
        started = time.monotonic()
        poison = [] if args.no_poison else [(b"poison", POISON, ())]
        produce(tansu.bootstrap, TOPIC, [*poison, *flood(args.records)])
        alter_until_answered(first.bootstrap)
        wait(
            lambda: "kafka.done." in str(describe_subscription(second.bootstrap, "good")),
            600,
            "the alter after the flood to reach the second gateway",
        )
        flood_s = time.monotonic() - started
        ends = [len(p.latencies) for p in probes]
        print(f"records {args.records}, poison: {not args.no_poison}, signed: {args.signed}")
        for name, probe, mark, end in zip(("first", "second"), probes, marks, ends, strict=True):
            print(f"  {name:6s} quiet  {figures(probe.latencies[:mark])}")
            print(f"  {name:6s} flood  {figures(probe.latencies[mark:end])}")
            if probe.errors:
                print(f"  {name:6s} errors {len(probe.errors)}: {probe.errors[:2]}")
        print(f"  flood written and read past by the second gateway in {flood_s:.1f} s")
        for gw in gateways:
            stalls = [(e["lag_ms"], e["cpu_ms"]) for e in gw.events("loop_stalled")]
            print(f"  {gw.data_dir.name:6s} loop stalls logged (lag ms, cpu ms): {stalls}")
        second.stop()
        started = time.monotonic()
        second.start(timeout=600)
        print(f"  second gateway restarted with the flood on the topic in "
              f"{time.monotonic() - started:.1f} s")  # fmt: skip
        for probe in probes:
            probe.__exit__()


if __name__ == "__main__":
    main()

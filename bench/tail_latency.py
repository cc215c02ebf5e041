"""Push tail latency of one gateway worker, open loop, with the gateway and the load
generator pinned to separate cores.

Standalone (the default): a gateway worker (landing exporter on) is pinned to one
core and a load generator process to another. The generator creates
``--instances`` client instances (a Get each) on ``--connections`` connections,
then

1. **saturation**: keeps ``--window`` pushes in flight per connection for
   ``--saturation-seconds`` and counts accepted pushes/s: the worker's saturation;
2. **open loop** at each ``--fractions`` of that rate (and at each ``--rates``
   pushes/s: the same load for two versions) for ``--seconds``: push *i* is
   due at ``start + i / rate`` and sent then whatever the answers do; its latency
   is from its due time to its answer (coordinated omission corrected: a stall
   delays every push due during it, and each is counted from when it was due).

It prints, per rate, p50 / p99 / p99.9 / max in ms, the answers by error code,
how late the generator itself sent the pushes (counted in the latencies: on a
busy host the generator's core is late too), the gateway's loop lag and longest
busy stretch in that phase (``bench/loop_probe``, injected into the gateway;
``--no-probe`` leaves it out) and its own loop-lag gauges from ``/metrics``.

``--proxy``: the same gateway in proxy mode in front of a Tansu broker; a
producer (librdkafka, one record at a time, acks=all) sends through the proxy
alone, then while the fleet pushes at ``--fractions[0]`` of the proxy's
saturation (or at ``--rates[0]`` pushes/s), then alone again; it prints produce
p50 / p99 for each and the difference (aim: p99 with the fleet at most 1 ms above
alone). The producer also sends straight to Tansu, alone and with the fleet: the
fleet's generator shares the producer's and Tansu's core, and what that costs a
producer that does not go through the proxy is not the proxy's.

    python bench/tail_latency.py --seconds 20
    python bench/tail_latency.py --proxy --seconds 15
    python bench/tail_latency.py --target both --rates 1000 2000 3000 --seconds 15

``--target kafka`` or ``both``: Apache Kafka 4.4 with the project's plugin, alone or
taking turns with the gateway on the same core (``bench/tail_kafka.py``).

The machine this runs on may be shared: the figures are for comparing runs on
the same machine (before / after), not absolute. Each phase also prints how much of
its core the gateway used (its own CPU clock over the phase's wall time) and the
hypervisor's steal on that core: a phase with steal measured the host too; compare
only runs where it stayed near zero.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import multiprocessing as mp
import os
import queue
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu import tree_cpu
from ports import TansuProcess, free_port, stop_process, wait_port

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FIXTURE = ROOT / "tests" / "data" / "librdkafka-2.16" / "consumer-push.otlp.bin"
GET, PUSH = 71, 72
TANSU_NODE = 111
_SIZE = struct.Struct(">i")


def cores() -> tuple[int | None, int | None]:
    """(the gateway's core, the generator's core); None where there is no second core."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None, None
    return allowed[0], allowed[1]


#: Scheduling priority of the gateway and the generator (``--nice``; 0 leaves it).
NICE = [0]


def pin(core: int | None, nice: int = 0) -> None:
    """Pin this process to ``core``; on a shared machine, ``nice`` < 0 (root) gives it
    the core before other users' processes."""
    if core is not None:
        os.sched_setaffinity(0, {core})
    if nice:
        os.setpriority(os.PRIO_PROCESS, 0, nice)


def rss_mib(pid: int) -> float:
    """RSS of ``pid`` and its children (workers, converters), MiB."""
    total = 0
    pids = [pid]
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    pids += [int(p) for p in out.stdout.split()]
    for p in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total / 2**20


class CoreShare:
    """What the gateway's core gave it between ``CoreShare(core, pid)`` and ``stop()``:
    ``gateway``, its CPU time (its own clock, all threads) as a share of the wall time,
    and ``steal``, the hypervisor's steal on that core (time the core's virtual CPU
    wanted to run and another guest had the real one). A phase with steal measured the
    host as much as the gateway. (``/proc/stat`` counts in ticks, and a virtual machine
    loses some: steal is a lower bound, and the core's other figures are not used.)"""

    def __init__(self, core: int | None, pid: int) -> None:
        self.core, self.pid = core, pid
        self._start = (self._stolen(), tree_cpu(pid), time.monotonic())
        self.gateway = 0.0
        self.steal: float | None = None

    def _stolen(self) -> int | None:
        if self.core is None:
            return None
        prefix = f"cpu{self.core} "
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith(prefix):
                return int(line.split()[8])  # user nice system idle iowait irq softirq steal
        return None

    def stop(self) -> CoreShare:
        stolen, cpu, wall = self._start
        wall = time.monotonic() - wall
        self.gateway = (tree_cpu(self.pid) - cpu) / wall
        now = self._stolen()
        if stolen is not None and now is not None:
            self.steal = (now - stolen) / os.sysconf("SC_CLK_TCK") / wall
        return self

    def steal_text(self) -> str:
        if self.steal is None:
            return "the gateway's core: not pinned"
        return f"steal on the gateway's core {self.core}: {self.steal:.0%} (at least)"


def fsync_ms(directory: Path, count: int = 100) -> list[float]:
    """fdatasync times (ms, sorted) of 4 KiB appends in ``directory``: every push
    waits for one (the landing exporter's group commit), so they bound the latency."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    times = []
    try:
        for _ in range(count):
            os.write(fd, b"\0" * 4096)
            started = time.perf_counter()
            os.fdatasync(fd)
            times.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return sorted(times)


def percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- the load generator (its own process, its own core) ------------------------------


class Pipe(asyncio.Protocol):
    """One pipelined connection: frames out, (correlation id, frame) in."""

    def __init__(self, on_frame: Any) -> None:
        self.buf = bytearray()
        self.on_frame = on_frame
        self.transport: asyncio.Transport | None = None
        self.next_id = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        start = 0
        while len(buf) - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if len(buf) - start - 4 < size:
                break
            frame = bytes(buf[start + 4 : start + 4 + size])
            start += 4 + size
            self.on_frame(self, frame)
        del buf[:start]

    def correlation(self) -> int:
        self.next_id = (self.next_id + 1) & 0x7FFFFFFF
        return self.next_id


class Fleet:
    """Instances multiplexed on a few connections, as ``bench/loadgen.py`` does."""

    def __init__(self, port: int, connections: int, instances: int, payload: bytes) -> None:
        self.port = port
        self.connections = connections
        self.instances = instances
        self.payload = payload
        self.pipes: list[Pipe] = []
        self.waiting: dict[tuple[int, int], Any] = {}
        self.templates: list[tuple[Pipe, bytearray]] = []

    def _frame_in(self, pipe: Pipe, frame: bytes) -> None:
        (corr,) = _SIZE.unpack_from(frame, 0)
        waiter = self.waiting.pop((id(pipe), corr), None)
        if waiter is not None:
            waiter(frame)

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(self.connections):
            _, pipe = await loop.create_connection(
                lambda: Pipe(self._frame_in), "127.0.0.1", self.port
            )
            self.pipes.append(pipe)

    def send(self, pipe: Pipe, frame: bytearray | bytes, waiter: Any) -> None:
        """Send ``frame`` with a fresh correlation id (patched in place)."""
        corr = pipe.correlation()
        frame = bytearray(frame) if isinstance(frame, bytes) else frame
        _SIZE.pack_into(frame, 8, corr)  # size(4) api_key(2) version(2) correlation(4)
        self.waiting[(id(pipe), corr)] = waiter
        assert pipe.transport is not None
        pipe.transport.write(bytes(frame))

    async def handshake(self) -> None:
        """A Get (zero id) per instance; keep an encoded push per instance."""
        from clientmetrics.wire import RequestHeader, decode_response, encode_request, request_type

        get = encode_request(
            RequestHeader(GET, 0, 0, "bench-fleet"),
            request_type(GET, 0)(client_instance_id=uuid.UUID(int=0)),
        )
        push_type = request_type(PUSH, 0)
        loop = asyncio.get_running_loop()
        window = 64
        per_pipe = self.instances // len(self.pipes)

        async def one(pipe: Pipe) -> None:
            for start in range(0, per_pipe, window):
                futures = []
                for _ in range(min(window, per_pipe - start)):
                    fut = loop.create_future()
                    self.send(pipe, get, fut.set_result)
                    futures.append(fut)
                for frame in await asyncio.gather(*futures):
                    _, body = decode_response(GET, 0, frame)
                    if int(body.error_code) != 0:
                        raise RuntimeError(f"Get answered {int(body.error_code)}")
                    push = encode_request(
                        RequestHeader(PUSH, 0, 0, "bench-fleet"),
                        push_type(
                            client_instance_id=body.client_instance_id,
                            subscription_id=int(body.subscription_id),
                            terminating=False,
                            compression_type=4,
                            metrics=self.payload,
                        ),
                    )
                    self.templates.append((pipe, bytearray(push)))

        await asyncio.gather(*(one(pipe) for pipe in self.pipes))
        # Push i goes to connection i mod connections, as independent clients' pushes
        # would spread; in handshake order, 64 pushes in a row went to one connection.
        by_pipe: dict[int, list[tuple[Pipe, bytearray]]] = {}
        for pipe, frame in self.templates:
            by_pipe.setdefault(id(pipe), []).append((pipe, frame))
        columns = list(by_pipe.values())
        self.templates = [
            column[row] for row in range(max(map(len, columns))) for column in columns
            if row < len(column)
        ]  # fmt: skip

    async def saturate(self, seconds: float, window: int) -> tuple[float, dict[int, int]]:
        """Closed loop, ``window`` pushes in flight per connection: accepted pushes/s."""
        loop = asyncio.get_running_loop()
        by_pipe: dict[int, list[bytearray]] = {}
        for pipe, frame in self.templates:
            by_pipe.setdefault(id(pipe), []).append(frame)
        codes: dict[int, int] = {}
        counted = [0]
        stop = loop.time() + seconds
        measure_from = loop.time() + min(1.0, seconds / 4)
        done = loop.create_future()
        running = [0]

        def start(pipe: Pipe, frames: list[bytearray], index: int) -> None:
            if loop.time() >= stop:
                running[0] -= 1
                if running[0] == 0 and not done.done():
                    done.set_result(None)
                return

            def answered(frame: bytes) -> None:
                code = struct.unpack_from(">h", frame, 9)[0]
                if loop.time() >= measure_from:
                    codes[code] = codes.get(code, 0) + 1
                    counted[0] += code == 0
                start(pipe, frames, index + window)

            self.send(pipe, frames[index % len(frames)], answered)

        for pipe in self.pipes:
            frames = by_pipe[id(pipe)]
            for i in range(window):
                running[0] += 1
                start(pipe, frames, i)
        await done
        return counted[0] / (stop - measure_from), codes

    async def open_loop(
        self, rate: float, seconds: float
    ) -> tuple[list[float], dict[int, int], list[float]]:
        """Push *i* is sent at its due time; latency from due time to answer (ms), and
        how late each push was sent (ms): a generator not given its core when due
        delays every push it owes, and the latency counts that too."""
        loop = asyncio.get_running_loop()
        latencies: list[float] = []
        codes: dict[int, int] = {}
        total = int(rate * seconds)
        templates = self.templates
        outstanding = [total]
        done = loop.create_future()
        clock = time.perf_counter

        def waiter(due: float) -> Any:
            def answered(frame: bytes) -> None:
                latencies.append((clock() - due) * 1000)
                code = struct.unpack_from(">h", frame, 9)[0]
                codes[code] = codes.get(code, 0) + 1
                outstanding[0] -= 1
                if outstanding[0] == 0 and not done.done():
                    done.set_result(None)

            return answered

        t0 = clock() + 0.05
        i = 0
        late: list[float] = []
        while i < total:
            now = clock()
            while i < total and t0 + i / rate <= now:
                pipe, frame = templates[i % len(templates)]
                self.send(pipe, frame, waiter(t0 + i / rate))
                late.append((clock() - t0 - i / rate) * 1000)
                i += 1
            if i < total:
                # Never spin: what falls due meanwhile is sent together, and timed from
                # its due time all the same (the generator's core is shared in --proxy).
                await asyncio.sleep(max(t0 + i / rate - clock(), 0.0005))
        await asyncio.wait_for(done, 120)
        latencies.sort()
        late.sort()
        return latencies, codes, late


def generator_main(
    core: int | None, port: int, args: dict[str, Any], payload: bytes, out: Any, go: Any
) -> None:
    """The generator process: pinned, no GC pauses, uvloop; reports through ``out``."""
    pin(core, args["nice"])
    import uvloop

    async def main() -> None:
        fleet = Fleet(port, args["connections"], args["instances"], payload)
        await fleet.connect()
        await fleet.handshake()
        gc.collect()
        gc.freeze()
        gc.disable()
        out.put(("ready", len(fleet.templates)))
        while True:
            command = await asyncio.get_running_loop().run_in_executor(None, go.get)
            if command[0] == "saturate":
                rate, codes = await fleet.saturate(command[1], args["window"])
                out.put(("saturation", rate, codes))
            elif command[0] == "open":
                latencies, codes, late = await fleet.open_loop(command[1], command[2])
                out.put(("open", latencies, codes, late))
            else:
                return

    uvloop.run(main())


class Generator:
    """The generator process seen from the bench."""

    def __init__(self, core: int | None, port: int, args: argparse.Namespace) -> None:
        ctx = mp.get_context("spawn")
        self.out = ctx.Queue()
        self.go = ctx.Queue()
        options = {
            "connections": args.connections,
            "instances": args.instances,
            "window": args.window,
            "nice": args.nice,
        }
        payload = zstandard.ZstdCompressor().compress(FIXTURE.read_bytes())
        self.proc = ctx.Process(
            target=generator_main, args=(core, port, options, payload, self.out, self.go)
        )
        self.proc.start()
        kind, count = self._get(600)
        assert kind == "ready", kind
        self.instances = count

    def _get(self, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                return self.out.get(timeout=1)
            if not self.proc.is_alive():
                raise RuntimeError(f"the generator died ({self.proc.exitcode})")
        raise RuntimeError("the generator did not answer")

    def saturation(self, seconds: float) -> tuple[float, dict[int, int]]:
        self.go.put(("saturate", seconds))
        _, rate, codes = self._get(seconds + 300)
        return float(rate), dict(codes)

    def open_loop(
        self, rate: float, seconds: float
    ) -> tuple[list[float], dict[int, int], list[float]]:
        """(latencies, answers by code, send lateness), ms sorted."""
        self.go.put(("open", rate, seconds))
        _, latencies, codes, late = self._get(seconds + 300)
        return list(latencies), dict(codes), list(late)

    def close(self) -> None:
        self.go.put(("stop",))
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()


# -- the gateway -----------------------------------------------------------------------


#: ``--probe``: the loop probe's output file (``bench/loop_probe``), else None.
PROBE: list[Path | None] = [None]


def probe_phase(pid: int) -> dict[str, float] | None:
    """Start (first call) or end (second call) a probe phase; its figures on ending."""
    out = PROBE[0]
    if out is None:
        return None
    lines = out.read_text().splitlines() if out.exists() else []
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        now = out.read_text().splitlines() if out.exists() else []
        if len(now) > len(lines):
            figures: dict[str, float] = json.loads(now[-1])
            return figures
        time.sleep(0.05)
    return None


def probe_line(figures: dict[str, float] | None) -> str:
    if figures is None:
        return ""
    return (
        f"; probe: lag max {figures['lag_max_ms']:.1f} ms p99 {figures['lag_p99_ms']:.1f} ms, "
        f"busy (CPU per 10 ms) max {figures['busy_max_ms']:.1f} ms p99 "
        f"{figures['busy_p99_ms']:.1f} ms"
    )


@contextlib.contextmanager
def gateway(
    core: int | None, data: Path, upstream: str | None = None
) -> Iterator[tuple[int, int, subprocess.Popen[bytes]]]:
    """A one-worker gateway pinned to ``core``: (client port, admin port, process)."""
    port, admin = free_port(), free_port()
    data.mkdir(parents=True, exist_ok=True)
    config = data / "gw.toml"
    config.write_text("[telemetry]\nmax_instances = 2000000\n")
    command = [
        str(BIN / "clientmetrics"), "serve", "--listen", f"127.0.0.1:{port}",
        "--data-dir", str(data), "--config", str(config), "--admin-listen", f"127.0.0.1:{admin}",
        "--log-level", "warning", "--log-format", "json",
    ]  # fmt: skip
    if upstream is not None:
        command += ["--upstream", upstream, "--broker-port-base", str(_port_block())]
    log = (data / "gateway.log").open("wb")
    env = dict(os.environ)
    if PROBE[0] is not None:
        probe_dir = str(Path(__file__).resolve().parent / "loop_probe")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (probe_dir, env.get("PYTHONPATH"))))
        env["LOOP_PROBE_OUT"] = str(PROBE[0])
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        preexec_fn=lambda: pin(core, NICE[0]),  # noqa: PLW1509
    )
    try:
        wait_port(port, 60)
        subscribe(port)
        time.sleep(1.0)
        yield port, admin, proc
    finally:
        stop_process(proc, 30)
        log.close()


def _port_block() -> int:
    for _ in range(100):
        base = free_port() - TANSU_NODE
        if base > 1024:
            return base
    raise RuntimeError("no port block")


def subscribe(port: int) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.kadmin import set_subscription

    set_subscription(
        f"127.0.0.1:{port}", "bench", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
    )


def scrape(admin: int) -> dict[str, float]:
    """The gateway's /metrics, name -> value (labels dropped)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=10) as response:
        text = response.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                values[name.split("{")[0]] = float(value)
    return values


class LagWatch:
    """Reads the gateway's loop-lag gauges every second while a phase runs."""

    def __init__(self, admin: int) -> None:
        self.admin = admin
        self.maxima: list[float] = []
        self.p99: list[float] = []
        self.busy: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            with contextlib.suppress(OSError):
                values = scrape(self.admin)
                for key, into in (("lag_max", self.maxima), ("lag_p99", self.p99),
                                  ("busy_max", self.busy)):  # fmt: skip
                    name = f"kafka_server_client_metrics_event_loop_{key}_seconds"
                    if name in values:
                        into.append(values[name] * 1000)

    def __enter__(self) -> LagWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def line(self) -> str:
        if not self.maxima:
            return "loop lag: (no gauge on /metrics)"
        return (
            "gateway's loop lag (/metrics, last minute: the phase before too): max "
            f"{max(self.maxima):.1f} ms, p99 up to "
            f"{max(self.p99, default=float('nan')):.1f} ms; longest busy stretch (CPU) "
            f"{max(self.busy, default=float('nan')):.1f} ms"
        )


def report(
    label: str, latencies: list[float], codes: dict[int, int], seconds: float, late: list[float]
) -> None:
    print(
        f"{label}: {len(latencies) / seconds:8,.0f} answered/s; from due time: "
        f"p50 {percentile(latencies, 0.5):7.2f} ms  p99 {percentile(latencies, 0.99):7.2f} ms  "
        f"p99.9 {percentile(latencies, 0.999):7.2f} ms  "
        f"max {latencies[-1] if latencies else 0:7.1f} ms; answers {codes}"
    )
    # The generator's own lateness is in the figures above: on a busy host they say
    # as much about the generator's core as about the gateway.
    print(
        f"  the generator sent them late by p50 {percentile(late, 0.5):.2f} ms, p99 "
        f"{percentile(late, 0.99):.2f} ms, p99.9 {percentile(late, 0.999):.2f} ms, max "
        f"{late[-1] if late else 0:.1f} ms (included above)"
    )


def standalone(args: argparse.Namespace, work: Path) -> None:
    gw_core, gen_core = cores()
    print(
        f"cores: gateway {gw_core}, generator {gen_core} (of {os.cpu_count()}); load average "
        f"{os.getloadavg()[0]:.1f}; {args.instances:,} instances on {args.connections} "
        f"connections; landing exporter on; nice {args.nice}"
    )
    syncs = fsync_ms(work / "data")
    print(
        f"the data dir's disk: fdatasync p50 {percentile(syncs, 0.5):.1f} ms, p99 "
        f"{percentile(syncs, 0.99):.1f} ms (each push waits for one: its latency's floor)"
    )
    with gateway(gw_core, work / "data") as (port, admin, proc):
        print(f"gateway pid {proc.pid}", flush=True)
        gen = Generator(gen_core, port, args)
        try:
            rss_start = rss_mib(proc.pid)
            share = CoreShare(gw_core, proc.pid)
            saturation, codes = gen.saturation(args.saturation_seconds)
            cpu = share.stop().gateway
            print(
                f"saturation (closed loop, window {args.window}/connection): "
                f"{saturation:,.0f} accepted pushes/s with {cpu:.0%} of a core "
                f"({saturation / max(cpu, 0.01):,.0f} per CPU-second); answers {codes}"
            )
            print(f"  {share.steal_text()}")
            phases = [(saturation * f, f"{f:.0%}") for f in args.fractions]
            phases += [(float(r), "fixed") for r in args.rates]
            for rate, what in phases:
                time.sleep(1.5)  # the instances' push interval, and a quiet loop
                probe_phase(proc.pid)
                share = CoreShare(gw_core, proc.pid)
                with LagWatch(admin) as lag:
                    latencies, codes, late = gen.open_loop(rate, args.seconds)
                share.stop()
                probed = probe_phase(proc.pid)
                label = f"open loop {what} ({rate:,.0f}/s)"
                report(label, latencies, codes, args.seconds, late)
                print(f"  {lag.line()}{probe_line(probed)}")
                print(f"  gateway CPU {share.gateway:.0%} of a core; {share.steal_text()}")
            print(f"gateway RSS: {rss_start:.0f} MiB after the handshake, "
                  f"{rss_mib(proc.pid):.0f} MiB at the end")  # fmt: skip
        finally:
            gen.close()


def produce_latencies(bootstrap: str, seconds: float) -> list[float]:
    """One record at a time (acks=all, linger 0): produce-to-delivery times, ms, sorted."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "log_level": 3,
         "enable.metrics.push": False}
    )  # fmt: skip
    topic = "bench-latency"
    producer.list_topics(topic, timeout=10)
    for _ in range(50):
        producer.produce(topic, value=b"w")
        producer.flush(10)
    times: list[float] = []
    done: list[int] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        producer.produce(topic, value=b"x" * 100, on_delivery=lambda _e, _m: done.append(0))
        while len(done) <= len(times):
            producer.poll(0.0002)
        times.append((time.perf_counter() - started) * 1000)
    producer.flush(10)
    return sorted(times)


def proxy(args: argparse.Namespace, work: Path) -> None:
    gw_core, gen_core = cores()
    tansu = TansuProcess().start()
    try:
        if gen_core is not None and tansu.proc is not None:
            os.sched_setaffinity(tansu.proc.pid, {gen_core})
            if args.nice:
                os.setpriority(os.PRIO_PROCESS, tansu.proc.pid, args.nice)
        print(
            f"cores: gateway (proxy) {gw_core}, fleet + producer + Tansu {gen_core}; load "
            f"average {os.getloadavg()[0]:.1f}; {args.instances:,} instances"
        )
        with gateway(gw_core, work / "proxy", upstream=tansu.bootstrap) as (port, _, proc):
            gen = Generator(gen_core, port, args)
            pin(gen_core, args.nice)  # the producer runs in this process
            try:
                saturation, _ = gen.saturation(args.saturation_seconds)
                # --rates: the same fleet for two versions (a fraction of each one's
                # own saturation is a different load for each).
                rate = args.rates[0] if args.rates else saturation * args.fractions[0]
                print(f"proxy saturation: {saturation:,.0f} pushes/s; fleet at {rate:,.0f}/s")
                bootstrap = f"127.0.0.1:{port}"
                alone = produce_latencies(bootstrap, args.seconds)
                direct_alone = produce_latencies(tansu.bootstrap, args.seconds)
                box: dict[str, Any] = {}
                fleet_s = 2 * args.seconds + 3
                fleet = threading.Thread(target=lambda: box.update(r=gen.open_loop(rate, fleet_s)))
                fleet.start()
                time.sleep(1.0)
                share = CoreShare(gw_core, proc.pid)
                beside = produce_latencies(bootstrap, args.seconds)
                share.stop()
                direct_beside = produce_latencies(tansu.bootstrap, args.seconds)
                fleet.join()
                again = produce_latencies(bootstrap, args.seconds)
            finally:
                gen.close()
        phases = (
            ("through the proxy, alone", alone),
            ("straight to Tansu, alone", direct_alone),
            ("through the proxy, with the fleet", beside),
            ("straight to Tansu, with the fleet", direct_beside),
            ("through the proxy, alone again", again),
        )
        for label, times in phases:
            print(
                f"produce {label:34s}: {len(times):6d} records, "
                f"p50 {percentile(times, 0.5):6.2f} ms  p99 {percentile(times, 0.99):6.2f} ms"
            )
        latencies, codes, late = box["r"]
        report("fleet pushes", latencies, codes, fleet_s, late)
        print(f"gateway CPU beside the fleet: {share.gateway:.0%} of a core; {share.steal_text()}")
        base = max(percentile(alone, 0.99), percentile(again, 0.99))
        print(f"produce p99 with the fleet - alone (the worse of both): "
              f"{percentile(beside, 0.99) - base:+.2f} ms")  # fmt: skip
        # The fleet's generator shares the producer's and Tansu's core: what the fleet
        # costs a producer that does not go through the proxy is not the proxy's.
        hop_alone = percentile(alone, 0.99) - percentile(direct_alone, 0.99)
        hop_beside = percentile(beside, 0.99) - percentile(direct_beside, 0.99)
        print(
            f"the proxy's own p99 (through it - straight to Tansu): alone {hop_alone:+.2f} ms, "
            f"with the fleet {hop_beside:+.2f} ms; the fleet adds {hop_beside - hop_alone:+.2f} ms"
        )
    finally:
        tansu.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="per open-loop phase")
    parser.add_argument("--saturation-seconds", type=float, default=8.0)
    parser.add_argument("--fractions", type=float, nargs="*", default=[0.7])
    parser.add_argument(
        "--rates",
        type=float,
        nargs="*",
        default=[],
        help="open-loop phases at these pushes/s as well (the same load for two versions)",
    )
    parser.add_argument(
        "--instances", type=int, default=None, help="default 20,000; 15,000 with Kafka"
    )
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--window", type=int, default=16, help="saturation: in flight/connection")
    parser.add_argument("--proxy", action="store_true")
    parser.add_argument(
        "--target",
        choices=("gateway", "kafka", "both"),
        default="gateway",
        help="kafka: Kafka 4.4 with the project's plugin; both: Kafka and the gateway taking "
        "turns on the same core (bench/tail_kafka.py)",
    )
    parser.add_argument("--rounds", type=int, default=4, help="--target kafka|both: per rate")
    parser.add_argument("--warmup-seconds", type=float, default=10.0, help="--target kafka|both")
    parser.add_argument(
        "--data-root",
        help="where the gateway's data dir goes (e.g. /dev/shm: takes the disk's fsync "
        "time out of the figures)",
    )
    parser.add_argument(
        "--probe",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure the gateway's loop per phase with bench/loop_probe (any version of "
        "it; the /metrics gauges cover the last minute, the phase before included)",
    )
    parser.add_argument(
        "--nice",
        type=int,
        default=0,
        help="priority of the gateway and the generator (negative: ahead of others; root)",
    )
    args = parser.parse_args()
    NICE[0] = args.nice
    if args.instances is None:
        args.instances = 20_000 if args.target == "gateway" else 15_000
    with tempfile.TemporaryDirectory(prefix="cm-tail-", dir=args.data_root) as tmp:
        if args.probe and args.target == "gateway":  # the probe's CPU is not Kafka's
            PROBE[0] = Path(tmp) / "probe.jsonl"
        if args.target != "gateway":
            import tail_kafka

            tail_kafka.run(args, Path(tmp))
        else:
            (proxy if args.proxy else standalone)(args, Path(tmp))


if __name__ == "__main__":
    main()

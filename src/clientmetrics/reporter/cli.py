"""``clientmetrics simulate``: drive a gateway (or broker) with simulated KIP-714 clients."""

from __future__ import annotations

import asyncio
import json

import click

from clientmetrics.reporter.sim_net import set_subscription
from clientmetrics.reporter.simulate import SimConfig, SimReport
from clientmetrics.reporter.simulate import simulate as run_simulation

__all__ = ["SUBSCRIPTION_NAME", "simulate"]

#: The catch-all subscription ``--interval-ms`` creates or updates.
SUBSCRIPTION_NAME = "clientmetrics-simulate"


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise click.BadParameter("expected HOST:PORT")
    return host or "127.0.0.1", int(port)


def _summary(report: SimReport) -> dict[str, object]:
    elapsed = report.elapsed_s or 1.0
    return {
        "clients": report.clients,
        "connections": report.connections,
        "elapsed_s": round(report.elapsed_s, 2),
        "handshakes": report.handshakes,
        "pushes": report.pushes,
        "pushes_per_s": round(report.pushes / elapsed, 1),
        "terminating_pushes": report.terminating_pushes,
        "empty_pushes": report.empty_pushes,
        "errors": {str(code): n for code, n in sorted(report.errors.items())},
        "transport_failures": report.transport_failures,
        "disabled_clients": report.disabled,
        "requests_by_version": {f"v{v}": n for v, n in sorted(report.versions.items())},
        "latency_ms": {
            "p50": report.percentile_ms(0.50),
            "p90": report.percentile_ms(0.90),
            "p99": report.percentile_ms(0.99),
            "max": report.percentile_ms(1.0),
        },
    }


@click.command()
@click.option("--bootstrap-server", required=True, help="HOST:PORT of the gateway or broker")
@click.option("--clients", type=click.IntRange(min=1), default=100, show_default=True)
@click.option(
    "--interval-ms",
    type=click.IntRange(min=100),
    default=None,
    help="Set a catch-all subscription with this interval.ms first (via the admin API)",
)
@click.option(
    "--duration",
    type=click.FloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="Seconds to run",
)
@click.option("--processes", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--clients-per-connection", type=click.IntRange(min=1), default=20, show_default=True)
@click.option(
    "--unhealthy",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="How many clients report request latencies far above normal",
)
@click.option("--unhealthy-latency-ms", type=float, default=8000.0, show_default=True)
@click.option("--seed", type=int, default=None, help="Random seed (reproducible runs)")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON")
def simulate(
    bootstrap_server: str,
    clients: int,
    interval_ms: int | None,
    duration: float,
    processes: int,
    clients_per_connection: int,
    unhealthy: int,
    unhealthy_latency_ms: float,
    seed: int | None,
    as_json: bool,
) -> None:
    """Run N simulated producer/consumer clients against BOOTSTRAP and report what they saw."""
    host, port = _host_port(bootstrap_server)
    if interval_ms is not None:
        configs = {"metrics": "org.apache.kafka.", "interval.ms": str(interval_ms)}
        asyncio.run(set_subscription(host, port, SUBSCRIPTION_NAME, configs))
    config = SimConfig(
        host=host,
        port=port,
        clients=clients,
        duration_s=duration,
        unhealthy=min(unhealthy, clients),
        unhealthy_latency_ms=unhealthy_latency_ms,
        clients_per_connection=clients_per_connection,
        seed=seed,
    )
    summary = _summary(run_simulation(config, processes))
    if as_json:
        click.echo(json.dumps(summary))
        return
    for key, value in summary.items():
        click.echo(f"{key:>22}: {value}")

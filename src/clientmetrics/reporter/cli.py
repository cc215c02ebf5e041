"""``clientmetrics simulate``: drive a gateway (or broker) with simulated KIP-714 clients."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click

from clientmetrics.client.properties import PROTOCOLS, ClientSecurity, read_properties
from clientmetrics.errors import ClientMetricsError, ConfigurationError
from clientmetrics.reporter.sim_net import delete_subscription, set_subscription
from clientmetrics.reporter.sim_payloads import FAULTS, SimFault
from clientmetrics.reporter.simulate import RunTag, SimConfig, SimReport
from clientmetrics.reporter.simulate import simulate as run_simulation

__all__ = ["SUBSCRIPTION_PREFIX", "simulate"]

#: The start of the name of the subscription ``--interval-ms`` creates for the run (and
#: deletes after it); the rest is the run's tag (``RunTag``).
SUBSCRIPTION_PREFIX = "clientmetrics-simulate-"


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter("expected HOST:PORT")
    return host or "127.0.0.1", int(port)


def _summary(report: SimReport, subscription: str | None) -> dict[str, object]:
    elapsed = report.elapsed_s or 1.0
    return {
        "subscription": subscription,
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


def _faults(specs: tuple[str, ...]) -> tuple[SimFault, ...]:
    try:
        return tuple(SimFault.parse(spec) for spec in specs)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--fault") from None


def _write_truth(path: Path, report: SimReport) -> None:
    """The injected faults beside the run's output: which instances, which fault, when."""
    rows = [
        {"client_instance_id": instance, "fault": kind, "onset": onset}
        for instance, kind, onset in sorted(report.faults)
    ]
    path.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


def _client_properties(path: Path | None, options: dict[str, str | None]) -> dict[str, str]:
    """The properties file overlaid with the explicit options, validated once here."""
    try:
        props = read_properties(path) if path is not None else {}
        props.update({key: value for key, value in options.items() if value is not None})
        ClientSecurity.from_properties(props)
    except ConfigurationError as exc:
        raise click.UsageError(str(exc)) from exc
    return props


def _remove_subscription(host: str, port: int, name: str, security: ClientSecurity) -> None:
    try:
        asyncio.run(delete_subscription(host, port, name, security))
    except (ClientMetricsError, OSError) as exc:
        click.echo(
            f"clientmetrics simulate: could not delete the subscription {name}: "
            f"{exc} (kafka-client-metrics --delete --name {name} removes it)",
            err=True,
        )


@click.command()
@click.option("--bootstrap-server", required=True, help="HOST:PORT of the gateway or broker.")
@click.option(
    "--clients",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Simulated clients, half producers and half consumers, each with its own client id.",
)
@click.option(
    "--interval-ms",
    type=click.IntRange(min=100),
    default=None,
    help=f"Create the subscription {SUBSCRIPTION_PREFIX}TAG (every metric, this interval.ms) "
    "for the run; it matches only this run's clients (their instance ids start with the "
    "run's tag) and is deleted when the run ends.",
)
@click.option(
    "--keep-subscription",
    is_flag=True,
    help="Leave --interval-ms's subscription in place after the run.",
)
@click.option(
    "--duration",
    type=click.FloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="Seconds the clients run once connected.",
)
@click.option(
    "--close-timeout",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Seconds each client's terminating push may take when the run ends.",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Processes the clients are spread over (one event loop each).",
)
@click.option(
    "--clients-per-connection",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Clients sharing one TCP connection (saves sockets in large load tests; "
    "the gateway gives a connection one client id, so they share it).",
)
@click.option(
    "--unhealthy",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="How many clients report request latencies far above normal.",
)
@click.option(
    "--unhealthy-latency-ms",
    type=float,
    default=8000.0,
    show_default=True,
    help="Request latency the unhealthy clients report.",
)
@click.option(
    "--fault",
    "faults",
    multiple=True,
    metavar="KIND@SECONDS:FRACTION",
    help="Inject a fault into a fraction of the clients it applies to, from SECONDS after "
    f"the start (repeatable; kinds: {', '.join(FAULTS)}), e.g. slow-processing@120s:0.05.",
)
@click.option(
    "--fault-truth",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the injected faults' ground truth here (JSON: instance, fault, onset).",
)
@click.option("--seed", type=int, default=None, help="Random seed (reproducible runs).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--command-config",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Kafka client properties (security.protocol, sasl.*, ssl.*), as kafka-client-metrics",
)
@click.option(
    "--security-protocol",
    type=click.Choice(PROTOCOLS, case_sensitive=False),
    help="security.protocol (overrides --command-config)",
)
@click.option(
    "--sasl-mechanism",
    type=click.Choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], case_sensitive=False),
    help="sasl.mechanism",
)
@click.option("--sasl-username", help="sasl.username")
@click.option("--sasl-password", help="sasl.password")
@click.option("--ssl-ca", type=click.Path(dir_okay=False), help="ssl.ca.location (PEM)")
def simulate(
    bootstrap_server: str,
    clients: int,
    interval_ms: int | None,
    keep_subscription: bool,
    duration: float,
    close_timeout: float,
    processes: int,
    clients_per_connection: int,
    unhealthy: int,
    unhealthy_latency_ms: float,
    faults: tuple[str, ...],
    fault_truth: Path | None,
    seed: int | None,
    as_json: bool,
    command_config: Path | None,
    security_protocol: str | None,
    sasl_mechanism: str | None,
    sasl_username: str | None,
    sasl_password: str | None,
    ssl_ca: str | None,
) -> None:
    """Run N simulated producer/consumer clients against BOOTSTRAP and report what they saw."""
    host, port = _host_port(bootstrap_server)
    props = _client_properties(
        command_config,
        {
            "security.protocol": security_protocol,
            "sasl.mechanism": sasl_mechanism,
            "sasl.username": sasl_username,
            "sasl.password": sasl_password,
            "ssl.ca.location": ssl_ca,
        },
    )
    tag = RunTag.new()
    subscription = tag.subscription_name if interval_ms is not None else None
    config = SimConfig(
        host=host,
        port=port,
        clients=clients,
        duration_s=duration,
        unhealthy=min(unhealthy, clients),
        unhealthy_latency_ms=unhealthy_latency_ms,
        clients_per_connection=clients_per_connection,
        close_timeout_s=close_timeout,
        seed=seed,
        client_properties=tuple(sorted(props.items())),
        run_tag=tag.value,
        faults=_faults(faults),
    )
    security = ClientSecurity.from_properties(props)
    try:
        if subscription is not None:
            configs = {
                "metrics": "org.apache.kafka.",
                "interval.ms": str(interval_ms),
                "match": tag.match,
            }
            asyncio.run(set_subscription(host, port, subscription, configs, security))
        try:
            report = run_simulation(config, processes)
            summary = _summary(report, subscription)
            if fault_truth is not None:
                _write_truth(fault_truth, report)
        finally:
            if subscription is not None and not keep_subscription:
                _remove_subscription(host, port, subscription, security)
    except (ClientMetricsError, OSError) as exc:
        # One line and exit 1: the gateway could not be reached or refused us.
        click.echo(f"clientmetrics simulate: {exc}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(summary))
        return
    for key, value in summary.items():
        click.echo(f"{key:>22}: {value}")

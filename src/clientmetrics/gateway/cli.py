"""``clientmetrics serve``: run the gateway."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import click
import structlog

from clientmetrics.cli_options import BadConfiguration, DescribedDefault, log_options
from clientmetrics.errors import ClientMetricsError, ConfigurationError
from clientmetrics.gateway.config import Address, GatewayConfig
from clientmetrics.gateway.config_load import load_config
from clientmetrics.logs import configure_logging

#: How long a thread may hold the interpreter lock while another waits for it
#: (Python's default: 5 ms). The landing WAL's thread takes the lock back from a busy
#: event loop several times per group commit (after each write and fsync): at 5 ms
#: a turn, that wait was most of a push's latency near saturation (export wait p50
#: 4.1 ms, p99 23 ms; at 0.5 ms: 2.0 ms and 10.4 ms, bench/tail_latency.py at 60 %).
SWITCH_INTERVAL_S = 0.0005


def _run(config: GatewayConfig, log_level: str, log_format: str, reuse_port: bool) -> None:
    import signal

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    # A SIGHUP (reload) that arrives while starting must not end the process.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    from clientmetrics.gateway.server import Gateway

    # Written by a thread: a slow reader of stderr must not hold the event loop.
    configure_logging(log_level, log_format, background=True)
    import uvloop

    uvloop.run(Gateway(config, reuse_port=reuse_port).run_until_signalled())


@click.command()
@click.option(
    "--listen",
    multiple=True,
    cls=DescribedDefault,
    show_default="127.0.0.1:9092",
    help="[PROTOCOL://]HOST:PORT to accept clients on (port 0: any), repeatable; PROTOCOL "
    "is PLAINTEXT (the default), SSL (needs [tls]), SASL_PLAINTEXT or SASL_SSL (need [sasl], "
    "or [proxy] sasl = passthrough).",
)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    help="Where subscriptions and landed data live (required unless the config file "
    "sets data_dir).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="TOML configuration file (options given here override it).",
)
@click.option(
    "--node-id",
    cls=DescribedDefault,
    type=int,
    show_default="0",
    help="Node id the gateway names itself with.",
)
@click.option(
    "--advertised-host",
    cls=DescribedDefault,
    show_default="the --listen host",
    help="Host name put in Metadata.",
)
@click.option("--admin-listen", help="HOST:PORT for the /metrics endpoint (off unless given).")
@click.option(
    "--workers",
    cls=DescribedDefault,
    type=int,
    show_default="1",
    help="Processes sharing the listen port (SO_REUSEPORT; standalone only).",
)
@click.option(
    "--upstream",
    help="Proxy mode: HOST:PORT[,HOST:PORT...] of the Kafka cluster to front (bootstrap brokers).",
)
@click.option(
    "--broker-port-base",
    cls=DescribedDefault,
    type=int,
    show_default="listen port + 1",
    help="Proxy mode: upstream node N is served on port BASE+N.",
)
@click.option(
    "--store",
    cls=DescribedDefault,
    type=click.Choice(["auto", "sqlite", "topic"]),
    show_default="auto",
    help="Subscription store: auto is a topic on the cluster (the upstream in proxy mode, "
    "or --subscriptions-bootstrap-servers), else SQLite in the data directory.",
)
@click.option(
    "--subscriptions-topic",
    cls=DescribedDefault,
    show_default="__client_metrics_subscriptions",
    help="Topic of the topic store.",
)
@click.option(
    "--subscriptions-bootstrap-servers",
    cls=DescribedDefault,
    show_default="the --upstream cluster",
    help="HOST:PORT[,...] of the cluster holding the topic store (standalone gateways "
    "sharing subscriptions).",
)
@log_options()
def serve(
    listen: tuple[str, ...],
    data_dir: Path | None,
    config_file: Path | None,
    node_id: int | None,
    advertised_host: str | None,
    admin_listen: str | None,
    workers: int | None,
    upstream: str | None,
    broker_port_base: int | None,
    store: str | None,
    subscriptions_topic: str | None,
    subscriptions_bootstrap_servers: str | None,
    log_level: str,
    log_format: str,
) -> None:
    """Run the KIP-714 gateway: standalone, or in front of a cluster with --upstream."""
    try:
        config = load_config(
            config_file,
            data_dir=data_dir,
            overrides={
                "listen": list(listen) or None,
                "node_id": node_id,
                "advertised_host": advertised_host,
                "admin_listen": admin_listen,
                "workers": workers,
                "upstream": upstream,
                "broker_port_base": broker_port_base,
                "store": store,
                "subscriptions_topic": subscriptions_topic,
                "subscriptions_bootstrap_servers": subscriptions_bootstrap_servers,
            },
        )
    except ClientMetricsError as exc:
        raise BadConfiguration(f"clientmetrics serve: {exc}") from exc
    if config.workers == 1:
        try:
            _run(config, log_level, log_format, reuse_port=False)
        except ConfigurationError as exc:  # found at start: a JWKS, an exporter's options
            raise BadConfiguration(f"clientmetrics serve: {exc}") from exc
        except ClientMetricsError as exc:
            click.echo(f"clientmetrics serve: {exc}", err=True)
            sys.exit(1)
        except OSError as exc:
            click.echo(
                f"clientmetrics serve: cannot listen on "
                f"{', '.join(str(listener) for listener in config.listeners)}: {exc.strerror}",
                err=True,
            )
            sys.exit(1)
        return
    _run_workers(config, log_level, log_format)


def _worker_config(config: GatewayConfig, index: int) -> GatewayConfig:
    """Worker ``index``'s view: its own /metrics port (admin port + index), and so for
    every exporter that listens (the Prometheus exporter's ``listen`` port + index)."""
    exporters = tuple(
        replace(spec, options={**spec.options, "listen": _plus(str(spec.options["listen"]), index)})
        if "listen" in spec.options
        else spec
        for spec in config.exporters
    )
    config = replace(config, exporters=exporters)
    admin = config.admin_listen
    if admin is None:
        return config
    port = admin.port + index if admin.port else 0
    return replace(config, admin_listen=Address(admin.host, port))


def _plus(listen: str, index: int) -> str:
    address = Address.parse(listen, "listen")
    return str(Address(address.host, address.port + index if address.port else 0))


def _run_workers(config: GatewayConfig, log_level: str, log_format: str) -> None:
    """Several processes share the port; each owns its instances and landing writer.

    Each worker serves /metrics for its own counters on the admin port plus its index.
    A supervisor (``gateway.workers``) restarts workers that die.
    """
    if any(listener.address.port == 0 for listener in config.listeners):
        raise BadConfiguration("clientmetrics serve: --workers needs a fixed --listen port")
    from clientmetrics.gateway.workers import supervise

    configure_logging(log_level, log_format)
    supervise(
        config.workers,
        "clientmetrics.gateway.cli:run_worker",
        lambda index: (_worker_config(config, index), log_level, log_format),
    )


def run_worker(config: GatewayConfig, log_level: str, log_format: str) -> None:
    """One worker process: a gateway on the shared port; a bad start exits in one line
    with ``START_FAILED``, which the supervisor counts however long the start took."""
    from clientmetrics.gateway.workers import START_FAILED

    try:
        _run(config, log_level, log_format, reuse_port=True)
    except ClientMetricsError as exc:
        structlog.get_logger("clientmetrics.gateway").error("worker_failed", error=str(exc))
        sys.exit(START_FAILED)
    except OSError as exc:
        structlog.get_logger("clientmetrics.gateway").error(
            "worker_failed", error=f"cannot listen on {config.listen}: {exc.strerror}"
        )
        sys.exit(START_FAILED)

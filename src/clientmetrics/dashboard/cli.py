"""``clientmetrics dashboard``: serve the web dashboard (read-only unless write actions are on)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import click

from clientmetrics.cli_options import (
    DEFAULT_DATA_DIR,
    CommandError,
    DescribedDefault,
    data_dir_option,
    log_options,
)
from clientmetrics.dashboard.app import Dashboard, DashboardConfig, DashboardServer
from clientmetrics.dashboard.operator_cli import (
    operator_config,
    operator_options,
    reaper_from,
    tls_from,
)
from clientmetrics.logs import configure_logging


@click.command()
@data_dir_option(
    "The gateway's data directory (landing zone, subscriptions.db, tables).",
    default=DEFAULT_DATA_DIR,
)
@click.option(
    "--tables",
    cls=DescribedDefault,
    type=click.Path(file_okay=False, path_type=Path),
    show_default="DATA/tables",
    help="Tables root.",
)
@click.option("--listen", default="127.0.0.1:8050", show_default=True, help="HOST:PORT to serve.")
@click.option(
    "--bootstrap-server",
    help="Read subscriptions through the admin API from this broker or gateway "
    "(default: the SQLite store in the data dir, read-only).",
)
@click.option("--gateway-metrics", help="A gateway's /metrics URL, for the Gateway page.")
@operator_options
@log_options()
def dashboard(
    data_dir: Path,
    tables: Path | None,
    listen: str,
    bootstrap_server: str | None,
    gateway_metrics: str | None,
    log_level: str,
    log_format: str,
    **operator: Any,
) -> None:
    """Serve the web dashboard over the pipeline's tables (read-only unless --write-actions)."""
    host, _, port_text = listen.rpartition(":")
    if not host or not port_text.isdigit() or int(port_text) > 65535:
        raise click.UsageError(f"--listen must be HOST:PORT, got {listen!r}")
    if not data_dir.is_dir():
        raise CommandError(
            f"clientmetrics dashboard: data directory {data_dir} does not exist "
            "(give the gateway's --data-dir)"
        )
    configure_logging(log_level, log_format)
    config = DashboardConfig(data_dir, tables, bootstrap_server, gateway_metrics)
    operators = operator_config(bootstrap_server, host.strip("[]"), **operator)
    reaper = reaper_from(bootstrap_server, operator["reap_command_config"])
    tls = tls_from(operator["tls_cert"], operator["tls_key"])
    try:
        server = DashboardServer(
            Dashboard(config, operators=operators), host.strip("[]"), int(port_text), tls
        )
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {listen}: {exc.strerror}") from exc
    stop = threading.Event()
    # Explicit handlers: started in the background by a shell, SIGINT arrives ignored.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda _signum, _frame: stop.set())
    click.echo(f"dashboard: {server.url} (Ctrl-C to stop)")
    server.start()
    if reaper is not None:
        reaper.start()
    try:
        stop.wait()
    finally:
        if reaper is not None:
            reaper.stop()
        server.stop()

"""``clientmetrics dashboard``: serve the read-only web dashboard."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from clientmetrics.cli_options import (
    DEFAULT_DATA_DIR,
    CommandError,
    DescribedDefault,
    data_dir_option,
    log_options,
)
from clientmetrics.dashboard.app import Dashboard, DashboardConfig, DashboardServer
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
@log_options()
def dashboard(
    data_dir: Path,
    tables: Path | None,
    listen: str,
    bootstrap_server: str | None,
    gateway_metrics: str | None,
    log_level: str,
    log_format: str,
) -> None:
    """Serve a read-only web dashboard over the pipeline's tables."""
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
    try:
        server = DashboardServer(Dashboard(config), host.strip("[]"), int(port_text))
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {listen}: {exc.strerror}") from exc
    stop = threading.Event()
    # Explicit handlers: started in the background by a shell, SIGINT arrives ignored.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda _signum, _frame: stop.set())
    click.echo(f"dashboard: {server.url} (Ctrl-C to stop)")
    server.start()
    try:
        stop.wait()
    finally:
        server.stop()

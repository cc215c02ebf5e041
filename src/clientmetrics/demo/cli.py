"""``clientmetrics demo``: the whole system on one machine, offline, in one command."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import click

from clientmetrics.cli_options import data_dir_option, log_options
from clientmetrics.demo.children import DemoError
from clientmetrics.demo.run import Demo, DemoOptions
from clientmetrics.extras import require
from clientmetrics.logs import configure_logging


@click.command()
@click.option(
    "--duration",
    type=click.FloatRange(min=30),
    help="Stop after this many seconds (default: run until Ctrl-C).",
)
@data_dir_option("Where everything is written (default: a new temporary directory, kept).")
@click.option(
    "--clients",
    type=click.IntRange(min=1),
    default=300,
    show_default=True,
    help="Simulated clients (one of them unhealthy).",
)
@click.option(
    "--dashboard-port",
    type=click.IntRange(0, 65535),
    default=8050,
    show_default=True,
    help="Port for the dashboard on 127.0.0.1 (a free one if taken).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON line too.")
@log_options("warning")
def demo(
    duration: float | None,
    data_dir: Path | None,
    clients: int,
    dashboard_port: int,
    as_json: bool,
    log_level: str,
    log_format: str,
) -> None:
    """Run a gateway, real and simulated clients, the Spark pipeline and the dashboard.

    Prints the dashboard's URL, progress, and a summary when it stops (Ctrl-C or
    --duration). Needs no network beyond 127.0.0.1.
    """
    require("pyspark")  # the demo runs the Spark pipeline
    configure_logging(log_level, log_format)  # the dashboard runs in this process
    root = data_dir or Path(tempfile.mkdtemp(prefix="clientmetrics-demo-"))
    options = DemoOptions(
        data_dir=root.resolve(),
        duration_s=duration,
        simulated_clients=clients,
        dashboard_port=dashboard_port,
    )
    runner = Demo(options, lambda line: click.echo(line, err=False))
    try:
        summary = runner.run()
    except DemoError as exc:
        click.echo(f"clientmetrics demo: {exc}", err=True)
        sys.exit(1)
    click.echo("\nsummary")
    for line in summary.lines():
        click.echo(line)
    # As it was run (.venv/bin/clientmetrics after `make run`), so that it works pasted.
    program = sys.argv[0] if Path(sys.argv[0]).name == "clientmetrics" else "clientmetrics"
    click.echo(f"\nlook again later: {program} dashboard --data-dir {root}")
    if as_json:
        click.echo(json.dumps(summary.as_dict()))

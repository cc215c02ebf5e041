"""The options ``clientmetrics pipeline run`` and ``stream`` share, by what they are about.

Each group is a list of click decorators; ``pipeline_options`` applies them
all, in the order ``--help`` shows them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from clientmetrics.cli_options import (
    DEFAULT_DATA_DIR,
    DescribedDefault,
    data_dir_option,
    log_options,
)
from clientmetrics.telemetry.otlp import TELEMETRY_TOPIC as DEFAULT_TOPIC

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _where() -> list[Decorator]:
    """Where the job runs, reads and writes."""
    return [
        data_dir_option(
            "The gateway's data directory (landing zone and default outputs).",
            default=DEFAULT_DATA_DIR,
        ),
        click.option(
            "--master",
            cls=DescribedDefault,
            show_default="local[*], or the one spark-submit was given",
            help="Spark master.",
        ),
        click.option(
            "--input",
            "input_path",
            cls=DescribedDefault,
            show_default="DATA/landing/pushes",
            help="Landed pushes (a local path or any Hadoop URL).",
        ),
        click.option(
            "--output",
            "output_path",
            cls=DescribedDefault,
            show_default="DATA/tables",
            help="Tables root.",
        ),
        click.option(
            "--checkpoint",
            cls=DescribedDefault,
            show_default="DATA/checkpoints/pipeline",
            help="Checkpoint shared by run and stream (what was processed).",
        ),
    ]


def _alerts() -> list[Decorator]:
    """The rules, and where their alerts go."""
    return [
        click.option(
            "--rules",
            type=click.Path(dir_okay=False, exists=True, path_type=Path),
            help="Alert rules (TOML).",
        ),
        click.option(
            "--alert-sink",
            cls=DescribedDefault,
            show_default="the rules file's sink, else DATA/alerts.jsonl",
            help="JSON-lines file new alerts are appended to.",
        ),
        click.option("--webhook", help="POST new alerts to this URL (overrides the rules file)."),
        click.option(
            "--alertmanager",
            metavar="URL",
            help="Deliver alerts and findings to this Prometheus Alertmanager (its v2 API; "
            "overrides the rules file).",
        ),
    ]


def _windows() -> list[Decorator]:
    """Event time: windows, lateness, and how a micro-batch is bounded."""
    return [
        click.option(
            "--window-seconds",
            type=click.IntRange(min=1),
            default=60,
            show_default=True,
            help="Length of the per-client windows (client_windows table).",
        ),
        click.option(
            "--lateness-seconds",
            type=click.IntRange(min=0),
            default=60,
            show_default=True,
            help="How late a push may arrive and still count in its window (watermark).",
        ),
        click.option(
            "--max-files-per-trigger",
            type=click.IntRange(min=1),
            cls=DescribedDefault,
            show_default="no limit",
            help="Landed files read per micro-batch.",
        ),
    ]


def _kafka() -> list[Decorator]:
    """The Kafka source (``--source kafka``)."""
    return [
        click.option(
            "--source",
            type=click.Choice(["landing", "kafka"]),
            default="landing",
            show_default=True,
            help="Read pushes from the landing directory or from a Kafka topic.",
        ),
        click.option(
            "--bootstrap-servers",
            metavar="HOST:PORT,...",
            help="The topic's cluster (--source kafka).",
        ),
        click.option(
            "--topic",
            default=DEFAULT_TOPIC,
            show_default=True,
            help="The topic the topic exporter or the broker plugin writes (--source kafka).",
        ),
        click.option(
            "--command-config",
            type=click.Path(dir_okay=False, exists=True, path_type=Path),
            help="Kafka client properties (security.protocol, sasl.*, ssl.*), as for"
            " kafka-client-metrics (--source kafka).",
        ),
        click.option(
            "--max-offsets-per-trigger",
            type=click.IntRange(min=1),
            cls=DescribedDefault,
            show_default="no limit",
            help="Records read per micro-batch (--source kafka).",
        ),
    ]


def _state_and_spark() -> list[Decorator]:
    """How long state is kept, Spark's own settings, and logging."""
    return [
        click.option(
            "--retention-seconds",
            type=click.IntRange(min=1),
            default=7 * 86_400,
            show_default=True,
            help="Drop the carried state of instances silent this long (event time).",
        ),
        click.option("--conf", multiple=True, help="Extra Spark setting KEY=VALUE (repeatable)."),
        log_options("warning"),
    ]


def pipeline_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """Every option ``run`` and ``stream`` share, applied to ``function``."""
    decorators = [*_where(), *_alerts(), *_windows(), *_kafka(), *_state_and_spark()]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function

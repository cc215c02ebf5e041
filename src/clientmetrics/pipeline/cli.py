"""``clientmetrics pipeline run|stream``."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from clientmetrics.cli_options import (
    CommandError,
)
from clientmetrics.client.properties import read_properties
from clientmetrics.errors import ClientMetricsError, ConfigurationError
from clientmetrics.logs import configure_logging
from clientmetrics.pipeline.cli_options import pipeline_options
from clientmetrics.pipeline.core.rules import RuleSet, load_rules
from clientmetrics.pipeline.run_summary import RunSummary, summarise_run, table_files
from clientmetrics.pipeline.spark.files import absolute_location
from clientmetrics.pipeline.stopping import StartUp, await_or_stop
from clientmetrics.telemetry.push_arrow import landed_pushes


def _config(options: dict[str, Any], trigger_seconds: float, flush_windows: bool) -> Any:
    from clientmetrics.pipeline.jobs.job import PipelineConfig

    # Every location absolute from here on (``absolute_location``): the default data
    # directory, ./cm-data, is relative, and Spark's checkpoint and pyarrow must agree.
    data = Path(absolute_location(str(options["data_dir"])))
    rules = load_rules(options["rules"]) if options["rules"] else RuleSet()
    if options["webhook"]:
        rules = replace(rules, webhook=options["webhook"])
    if options["alertmanager"]:
        rules = replace(rules, alertmanager=options["alertmanager"])
    checkpoint = options["checkpoint"] or str(data / "checkpoints" / "pipeline")
    sink = options["alert_sink"] or rules.sink or str(data / "alerts.jsonl")
    return PipelineConfig(
        kafka=_kafka(options),
        input_path=absolute_location(options["input_path"] or str(landed_pushes(data))),
        output_path=absolute_location(options["output_path"] or str(data / "tables")),
        checkpoint_path=absolute_location(checkpoint),
        rules=rules,
        alert_sink=absolute_location(sink),
        window_seconds=options["window_seconds"],
        lateness_seconds=options["lateness_seconds"],
        max_files_per_trigger=options["max_files_per_trigger"],
        trigger_seconds=trigger_seconds,
        flush_windows=flush_windows,
        retention_seconds=options["retention_seconds"],
    )


def _kafka(options: dict[str, Any]) -> Any:
    """The Kafka source the options name (None for the landing source)."""
    if options["source"] != "kafka":
        for name in ("bootstrap_servers", "command_config", "max_offsets_per_trigger"):
            if options[name] is not None:
                option = "--" + name.replace("_", "-")
                raise ConfigurationError(f"{option} is for --source kafka")
        return None
    from clientmetrics.pipeline.jobs.sources import KafkaSource

    if not options["bootstrap_servers"]:
        raise ConfigurationError("--source kafka needs --bootstrap-servers")
    properties = read_properties(options["command_config"]) if options["command_config"] else {}
    return KafkaSource(
        bootstrap_servers=options["bootstrap_servers"],
        topic=options["topic"],
        properties=properties,
        max_offsets_per_trigger=options["max_offsets_per_trigger"],
    )


def _local_path(path: str) -> Path | None:
    """``path`` as a local path, or None for a Hadoop URL (s3a://, hdfs://...)."""
    if path.startswith("file:"):
        return Path(path.removeprefix("file:").removeprefix("//"))
    return None if "://" in path else Path(path)


def _check_reachable(master: str | None, kafka: Any) -> None:
    """One line, within ``reach.CONNECT_TIMEOUT_S`` each, when the master or the topic
    cannot be used: Spark would retry for minutes, or for ever, then print pages."""
    from clientmetrics.pipeline.jobs.reach import Unreachable, check_kafka, check_master

    try:
        if master is not None:
            check_master(master)
        if kafka is not None:
            check_kafka(kafka.bootstrap_servers, kafka.topic, kafka.properties)
    except Unreachable as exc:
        raise CommandError(f"clientmetrics pipeline: {exc}") from exc


def failure(exc: Exception) -> str:
    """What made a query stop, in one line: the error ending the innermost Python
    traceback in its message (a task's or the batch's own code), else the line
    after Spark's "terminated with exception"."""
    lines = str(exc).splitlines()
    starts = [
        i for i, line in enumerate(lines) if line.rstrip().endswith("(most recent call last):")
    ]
    for after in lines[starts[-1] + 1 :] if starts else ():
        if after and not after[0].isspace():
            return after.strip()
    text = str(exc).strip()
    cause = text.partition("terminated with exception: ")[2] or text
    return cause.splitlines()[0] if cause else type(exc).__name__


def _start(
    options: dict[str, Any], *, trigger_seconds: float, flush: bool, once: bool
) -> RunSummary | None:
    try:
        config = _config(options, trigger_seconds, flush)
        extra = dict(item.split("=", 1) for item in options["conf"])
    except (ConfigurationError, ValueError) as exc:
        raise click.UsageError(str(exc)) from exc
    _check_reachable(options["master"], config.kafka)
    from pyspark.errors import AnalysisException, StreamingQueryException

    from clientmetrics.pipeline.jobs.job import PipelineJob
    from clientmetrics.pipeline.spark.connector import with_connector
    from clientmetrics.pipeline.spark.session import build_session

    landing = _local_path(config.input_path)
    if config.kafka is None and landing is not None and not landing.is_dir():
        raise CommandError(
            f"clientmetrics pipeline: nothing has landed yet: {landing} does not exist "
            "(run a gateway with this --data-dir first)"
        )
    configure_logging(options["log_level"], options["log_format"])
    master = options["master"]
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = "local[*]"  # not under spark-submit, which would have started the JVM
    with StartUp() as start_up:
        try:
            if config.kafka is not None:
                extra = with_connector(extra)
            spark = build_session(master, conf=extra)
        except ClientMetricsError as exc:
            raise CommandError(f"clientmetrics pipeline: {exc}") from exc
        try:
            start_up.install()  # pyspark's SparkContext replaced the SIGINT handler
            start_up.check()
            spark.sparkContext.setLogLevel("WARN")
            try:
                job = PipelineJob(spark, config)
            except ValueError as exc:
                raise click.UsageError(str(exc)) from exc
            tables = _local_path(config.output_path)
            before = table_files(tables) if tables is not None else {}
            query = job.start(available_now=once)
            if start_up.count:
                query.stop()
                start_up.check()
        except BaseException:
            spark.stop()
            raise
    try:
        if not once:
            origin = f"topic {config.kafka.topic}" if config.kafka else config.input_path
            click.echo(f"streaming from {origin}; Ctrl-C to stop", err=True)
        try:
            await_or_stop(query)
        except AnalysisException as exc:  # e.g. an unreadable input path on a cluster
            message = str(exc).strip().splitlines()[0]
            raise CommandError(f"clientmetrics pipeline: {message}") from exc
        except StreamingQueryException as exc:  # a batch failed: Spark logged its trace
            raise CommandError(
                f"clientmetrics pipeline: the query stopped: {failure(exc)}"
            ) from exc
        if not once or tables is None:
            return None
        return summarise_run(tables, before, job.batches, config.rules.rules)
    finally:
        spark.stop()


@click.group()
def pipeline() -> None:
    """Turn landed telemetry pushes into tables, a client inventory and alerts (Spark)."""


@pipeline.command()
@pipeline_options
@click.option(
    "--flush-windows",
    is_flag=True,
    help="Also write windows the watermark has not closed yet (for a final run).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def run(flush_windows: bool, as_json: bool, **options: Any) -> None:
    """Process every landed file not yet processed, then exit with a summary."""
    summary = _start(options, trigger_seconds=0.0, flush=flush_windows, once=True)
    if summary is None:
        return
    for rule, metric in summary.unmatched_rules.items():
        click.echo(
            f"clientmetrics pipeline: warning: rule {rule!r}: no client sent {metric!r} "
            "(check the name; a prefix must end with '.')",
            err=True,
        )
    if as_json:
        click.echo(json.dumps(summary.as_dict()))
    else:
        click.echo("\n".join(summary.lines()))


@pipeline.command()
@pipeline_options
@click.option(
    "--trigger-seconds",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Seconds between micro-batches (0: as fast as possible).",
)
def stream(trigger_seconds: float, **options: Any) -> None:
    """Process files as they land, until stopped (Structured Streaming)."""
    _start(options, trigger_seconds=trigger_seconds, flush=False, once=False)


@pipeline.command("fetch-jars")
def fetch_jars() -> None:
    """Fetch Spark's Kafka connector jars (for --source kafka) from Maven Central, once."""
    from clientmetrics.pipeline.spark.connector import fetch

    try:
        click.echo(str(fetch()))
    except ConfigurationError as exc:
        raise CommandError(f"clientmetrics pipeline fetch-jars: {exc}") from exc

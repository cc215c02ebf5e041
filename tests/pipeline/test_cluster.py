"""``pipeline run`` and ``pipeline stream`` on a real Spark standalone cluster.

A master and two workers are started from the pyspark wheel (``spark-class``),
on 127.0.0.1, and stopped by PID. The job ships itself to the executors (a zip
of the package, the driver's interpreter): nothing is installed for it. The
four tables must be the golden ones, exactly as a local run makes them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from tests.pipeline.golden import TABLES, canonical_rows, golden_rows, read_table
from tests.pipeline.test_golden import land_golden
from tests.procs import free_port, stop_process

# A cluster start and a whole job on two shared cores can take longer than the default timeout.
pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(900)]

SPARK_HOME = Path(pyspark.__file__).parent
CLI = Path(sys.executable).parent / "clientmetrics"
RULES_TOML = """
[[rule]]
name = "slow"
metric = "org.apache.kafka.producer.node.request.latency.avg"
condition = "exceeded 5000 ms for more than 120 seconds"

[[rule]]
name = "c-high"
metric = "c"
op = ">="
threshold = 4
for = "15s"
"""


def _env(tmp: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "SPARK_WORKER_DIR": str(tmp / "work"),
    }
    env.pop("PYSPARK_PYTHON", None)  # the job must choose the executors' Python itself
    return env


def _wait_for_line(log: Path, text: str, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        time.sleep(0.3)
    pytest.fail(f"{text!r} not in {log}")


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cluster")


def _executors_ran(tmp: Path) -> bool:
    """Whether both workers launched executors (an app directory in each work dir)."""
    return all(any((tmp / f"work-{index}").glob("app-*")) for index in range(2))


@pytest.fixture(scope="module")
def cluster(cluster_dir: Path) -> Iterator[str]:
    """spark://… of a standalone master with two one-core workers."""
    tmp = cluster_dir
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    env = _env(tmp)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        master_log = tmp / "master.log"
        with master_log.open("wb") as out:
            processes.append(
                subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(free_port())],
                    env=env, stdout=out, stderr=subprocess.STDOUT,
                )
            )  # fmt: skip
        _wait_for_line(master_log, "I have been elected leader", processes[0], 90)
        for index in range(2):
            log = tmp / f"worker-{index}.log"
            with log.open("wb") as out:
                worker = subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host",
                     "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port",
                     str(free_port()), "--work-dir", str(tmp / f"work-{index}")],
                    env=env, stdout=out, stderr=subprocess.STDOUT,
                )  # fmt: skip
            processes.append(worker)
            _wait_for_line(log, "Successfully registered with master", worker, 90)
        yield url
    finally:
        for process in reversed(processes):  # the workers, then the master
            stop_process(process, 30)


def _command(verb: str, url: str, data: Path, rules: Path, *extra: str) -> list[str]:
    return [
        str(CLI), "pipeline", verb, "--master", url, "--data-dir", str(data),
        "--rules", str(rules), "--max-files-per-trigger", "1",
        "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2", *extra,
    ]  # fmt: skip


def _golden(tables: Path) -> bool:
    try:
        return all(canonical_rows(read_table(tables, n)) == golden_rows(n) for n in TABLES)
    except (OSError, ValueError):  # a table not (fully) written yet
        return False


def _prepare(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "cm-data"
    land_golden(data)
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES_TOML, encoding="utf-8")
    return data, rules


def test_pipeline_run_on_a_standalone_cluster_makes_the_golden_tables(
    cluster: str, cluster_dir: Path, tmp_path: Path
) -> None:
    data, rules = _prepare(tmp_path)
    done = subprocess.run(
        _command("run", cluster, data, rules),
        env=_env(tmp_path),
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    assert _executors_ran(cluster_dir)
    for name in TABLES:
        assert canonical_rows(read_table(data / "tables", name)) == golden_rows(name), name


def test_pipeline_stream_on_a_standalone_cluster_makes_the_golden_tables(
    cluster: str, tmp_path: Path
) -> None:
    data, rules = _prepare(tmp_path)
    log = tmp_path / "stream.log"
    with log.open("wb") as out:
        stream = subprocess.Popen(
            _command("stream", cluster, data, rules, "--trigger-seconds", "1"),
            env=_env(tmp_path),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 600
        while not _golden(data / "tables"):
            assert stream.poll() is None, log.read_text(errors="replace")[-4000:]
            assert time.monotonic() < deadline, "the stream never made the golden tables"
            time.sleep(2)
    finally:
        stream.send_signal(signal.SIGINT)
        try:
            stream.wait(timeout=60)
        except subprocess.TimeoutExpired:
            stream.kill()
            stream.wait()

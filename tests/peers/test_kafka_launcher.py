"""The Kafka launcher waits for this run's start line, not one an earlier run left in
the log it appends to (a restart on the same work directory returned at once)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from peers.kafka.launcher import STARTED_LINE, KafkaBroker, logged_since

EARLIER_RUN = f"[2026-11-28 10:00:00] INFO [KafkaRaftServer nodeId=1] {STARTED_LINE}\n"


def test_a_line_counts_only_after_the_offset(tmp_path: Path) -> None:
    log = tmp_path / "broker.log"
    assert not logged_since(log, 0, STARTED_LINE)  # no log yet
    log.write_text(EARLIER_RUN)
    since = log.stat().st_size
    assert logged_since(log, 0, STARTED_LINE)
    assert not logged_since(log, since, STARTED_LINE)
    with log.open("a") as file:
        file.write("INFO starting\n")
    assert not logged_since(log, since, STARTED_LINE)
    with log.open("a") as file:
        file.write(EARLIER_RUN.replace("10:00:00", "10:05:00"))
    assert logged_since(log, since, STARTED_LINE)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[KafkaBroker]:
    """A launcher whose 'broker' is a process that never logs (it only lives)."""
    broker = KafkaBroker(tmp_path)
    broker.log_path.write_text(EARLIER_RUN)
    broker.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield broker
    broker.kill()


def test_an_earlier_runs_start_line_is_not_this_ones(broker: KafkaBroker) -> None:
    since = broker.log_path.stat().st_size
    with pytest.raises(RuntimeError, match="did not start"):
        broker._wait_started(time.monotonic(), 0.5, since)
    with broker.log_path.open("a") as file:
        file.write(EARLIER_RUN.replace("10:00:00", "10:05:00"))
    broker._wait_started(time.monotonic(), 60, since)  # returns: this run's line is there

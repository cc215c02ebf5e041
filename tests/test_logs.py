"""The gateway's log lines are written by a thread: a stalled stderr never blocks the
caller, and what cannot wait is dropped and counted, in order otherwise."""

from __future__ import annotations

import io
import json
import threading

from clientmetrics.logs import BackgroundWriter


class StuckStream(io.StringIO):
    """A stderr whose reader has stopped reading, until ``unblock`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.unblock = threading.Event()

    def write(self, text: str) -> int:
        self.unblock.wait()
        return super().write(text)


def test_writing_never_waits_for_a_stuck_stream_and_drops_are_counted() -> None:
    stream = StuckStream()
    writer = BackgroundWriter(stream, max_lines=10)
    written = threading.Event()

    def write_all() -> None:
        for i in range(100):
            writer.write(f"line {i}")
        written.set()

    # 100 writes against a stream that blocks until told: a write that waited for it
    # would never end (the deadline is only how long to wait for that failure).
    threading.Thread(target=write_all, daemon=True).start()
    assert written.wait(60), "a write waited for the stuck stream"
    stream.unblock.set()
    writer.close()
    lines = stream.getvalue().splitlines()
    kept = [line for line in lines if line.startswith("line ")]
    assert kept == sorted(kept, key=lambda line: int(line.split()[1]))  # in order
    (report,) = [json.loads(line) for line in lines if line.startswith("{")]
    assert report["event"] == "log_lines_dropped"
    assert len(kept) + report["count"] == 100
    assert 10 <= len(kept) <= 12  # the queue's bound, and the line the thread was writing


def test_close_writes_everything_queued() -> None:
    stream = io.StringIO()
    writer = BackgroundWriter(stream)
    for i in range(500):
        writer.write(f"{i}")
    writer.close()
    assert stream.getvalue().splitlines() == [str(i) for i in range(500)]


def test_the_queue_is_bounded_in_bytes_too() -> None:
    # A failed login's line names the user it claimed: up to hundreds of KB each.
    stream = StuckStream()
    writer = BackgroundWriter(stream, max_lines=10_000, max_chars=1_000_000)
    for i in range(100):
        writer.write(f"{i:03} " + "u" * 100_000)
    stream.unblock.set()
    writer.close()
    lines = stream.getvalue().splitlines()
    kept = [line for line in lines if not line.startswith("{")]
    (report,) = [json.loads(line) for line in lines if line.startswith("{")]
    assert 9 <= len(kept) <= 11  # 1 MB queued, and the line the thread was writing
    assert len(kept) + report["count"] == 100

"""New alerts go to a JSON-lines sink and, when configured, a webhook."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from clientmetrics.pipeline.jobs.notify import AlertNotifier


class _Recorder(BaseHTTPRequestHandler):
    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        _Recorder.bodies.append(self.rfile.read(length))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[str]:
    _Recorder.bodies = []
    server = HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/alerts"
    server.shutdown()
    thread.join(5)


EVENT = {
    "alert_id": "abc",
    "status": "firing",
    "labels": {"client_id": "app"},
    "fired_at": datetime(2026, 11, 21, 12, 0, tzinfo=UTC),
}


def test_events_are_appended_as_json_lines_and_posted(tmp_path: Path, webhook: str) -> None:
    sink = tmp_path / "out" / "alerts.jsonl"
    notifier = AlertNotifier(str(sink), webhook)
    notifier.notify([EVENT])
    notifier.notify([{**EVENT, "status": "resolved"}])
    lines = [json.loads(line) for line in sink.read_text().splitlines()]
    assert [line["status"] for line in lines] == ["firing", "resolved"]
    assert lines[0]["fired_at"] == "2026-11-21T12:00:00+00:00"
    assert lines[0]["labels"] == {"client_id": "app"}
    posted = [json.loads(body) for body in _Recorder.bodies]
    assert [batch[0]["status"] for batch in posted] == ["firing", "resolved"]


def test_a_dead_webhook_does_not_lose_the_sink(tmp_path: Path) -> None:
    sink = tmp_path / "alerts.jsonl"
    AlertNotifier(str(sink), "http://127.0.0.1:9/alerts", timeout=1).notify([EVENT])
    assert len(sink.read_text().splitlines()) == 1


def test_nothing_to_announce_writes_nothing(tmp_path: Path) -> None:
    sink = tmp_path / "alerts.jsonl"
    AlertNotifier(str(sink), None).notify([])
    assert not sink.exists()

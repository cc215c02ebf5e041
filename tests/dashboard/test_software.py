"""The "client software" page over pushes the real Java, franz-go and librdkafka clients sent."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

from clientmetrics.dashboard import Dashboard, DashboardConfig
from tests.dashboard.conftest import NOW
from tests.golden import FRANZ_GO, JAVA, LIBRDKAFKA
from tests.synthetic import Push, land


def golden_push(folder: Path, role: str, seconds_ago: int) -> Push:
    at = int((NOW - timedelta(seconds=seconds_ago)).timestamp() * 1e6)
    payload = (folder / f"{role}-push.otlp.bin").read_bytes()
    if folder == LIBRDKAFKA:  # captured from confluent-kafka 2.16.1 (tests/data/README.md)
        name, version, instance = "confluent-kafka-python", "2.16.1-rdkafka-2.16.0", f"rd-{role}"
    else:
        labels = json.loads((folder / f"{role}-labels.json").read_text())
        name, version = labels["client_software_name"], labels["client_software_version"]
        instance = labels["client_instance_id"]
    return Push(at, instance, payload, client_software_name=name, client_software_version=version)


def test_software_page_shows_versions_instances_and_standard_coverage(tmp_path: Path) -> None:
    pushes = [
        golden_push(folder, role, seconds)
        for seconds, (folder, role) in enumerate(
            (f, r) for f in (JAVA, FRANZ_GO, LIBRDKAFKA) for r in ("producer", "consumer")
        )
    ]
    land(tmp_path, pushes)
    app = Dashboard(DashboardConfig(tmp_path), clock=NOW.timestamp)
    response = app.handle("/software")
    assert response.status == 200
    page = response.body.decode()
    assert '<a href="/software" class=on>Client software</a>' in page
    rows = re.findall(r"<tr><td><b>(.*?)</b></td><td>(.*?)</td><td>(\d+)</td><td>(.*?)</td>"
                      r"<td class=coverage>(.*?)</td><td class=wrap>(.*?)</td>", page)  # fmt: skip
    table = {
        (name, version): (int(n), roles, cover, lacks)
        for name, version, n, roles, cover, lacks in rows
    }
    assert table["apache-kafka-java", "4.4.0"][:3] == (2, "consumer, producer", "21 of 21 (100%)")
    assert table["confluent-kafka-python", "2.16.1-rdkafka-2.16.0"][2] == "21 of 21 (100%)"
    franz = table["kgo", "v1.22.3"]
    assert franz[:3] == (2, "consumer, producer", "8 of 21 (38%)")
    assert "<code>producer.record.queue.time.avg</code>" in franz[3]
    assert "<code>consumer.poll.idle.ratio.avg</code>" in franz[3]
    assert "node.request.latency.avg" not in franz[3]


def test_software_page_without_pushes_says_so(tmp_path: Path) -> None:
    app = Dashboard(DashboardConfig(tmp_path), clock=NOW.timestamp)
    assert "No pushes with metrics yet." in app.handle("/software").body.decode()

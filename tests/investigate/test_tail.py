"""The landing tail shows every acknowledged push exactly once, while segments roll and land.

The gateway rolls its WAL every 0.2 s and the tail is read less often than
that, so most segments are converted to Parquet between two reads: their rows
must come from the files, the rest from the WAL, none twice.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from clientmetrics.admin import alter, subscription_configs
from clientmetrics.investigate.live import Selection, live_points
from clientmetrics.investigate.tail import LandingTail
from tests.procs import GatewayProcess, wait_for
from tests.pushers import METRIC, Outcomes, run_client

pytestmark = pytest.mark.integration


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path / "data", "[exporters.landing]\nroll_seconds = 0.2\n").start()
    yield gw
    assert gw.stop() == 0


def test_every_acknowledged_push_once(gateway: GatewayProcess) -> None:
    alter(gateway.bootstrap, "all", subscription_configs(metrics=["*"], interval_ms=100))
    tail = LandingTail(gateway.data_dir)
    selection = Selection({"client_id": "tail-.*"}, (METRIC,))
    shown: Counter[tuple[str, int]] = Counter()
    outcomes = Outcomes()

    def read() -> None:
        for point in live_points(tail.read(), selection):
            assert point.value is not None
            shown[(point.client_instance_id, int(point.value))] += 1

    def landed_files() -> int:
        pushes = gateway.data_dir / "landing" / "pushes"
        return len(list(pushes.glob("date=*/hour=*/*.parquet")))

    async def push_until_landed(files: int, timeout: float) -> None:
        """Push until ``files`` segments have landed as Parquet (the conversions to follow)
        and 50 pushes were acknowledged (however slowly a busy machine serves them)."""
        stop = asyncio.Event()
        address = [("127.0.0.1", gateway.port)]
        clients = [asyncio.create_task(run_client(f"tail-{i}", address, stop, outcomes))
                   for i in range(3)]  # fmt: skip
        deadline = time.monotonic() + timeout
        while (landed_files() < files or len(outcomes.acked) < 50) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(*clients)

    reader_stop = threading.Event()

    def reader() -> None:
        while not reader_stop.wait(0.5):
            read()

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        asyncio.run(push_until_landed(4, 90))
    finally:
        reader_stop.set()
        thread.join()
    acked = {(str(instance), seq) for instance, seq in outcomes.acked}
    assert len(acked) >= 50

    def all_shown() -> bool:
        read()
        return acked <= set(shown)

    wait_for(all_shown, 30, what="every acknowledged push shown")
    assert max(shown.values()) == 1
    assert landed_files() >= 4  # segments did land while the tail was reading

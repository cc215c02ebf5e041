from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.procs import GatewayProcess


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One standalone gateway shared by a module's tests (each test uses its own names)."""
    gw = GatewayProcess(tmp_path_factory.mktemp("gateway") / "data").start()
    yield gw
    assert gw.stop() == 0


@pytest.fixture
def fresh_gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway with no subscriptions, for tests that need an empty listing."""
    gw = GatewayProcess(tmp_path / "data").start()
    yield gw
    assert gw.stop() == 0

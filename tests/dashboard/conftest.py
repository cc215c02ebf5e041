from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.dashboard.tables import DataDir

#: A fixed "now" for the dashboard's clock; data is written around it.
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture
def data(tmp_path: Path) -> DataDir:
    return DataDir(tmp_path / "cm-data", NOW).build()

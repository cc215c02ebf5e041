"""Fixtures for the exporter tests."""

from __future__ import annotations

import pytest
from landing_helpers import PushFactory, build_push


@pytest.fixture
def make_push() -> PushFactory:
    return build_push

"""Exporter discovery through entry points, and the in-memory test double."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest
from landing_helpers import build_push

from clientmetrics.errors import ConfigurationError
from clientmetrics.exporters import (
    Exporter,
    ExportError,
    InMemoryExporter,
    LandingExporter,
    load_exporter,
    load_exporters,
    registry,
)
from clientmetrics.telemetry.model import AcceptedPush

PUSH = build_push(1, received_at_ms=1, client_instance_id=uuid.uuid4(), payload=b"x")


class _FakeEntryPoint:
    def __init__(self, name: str, target: object) -> None:
        self.name = name
        self._target = target

    def load(self) -> object:
        if isinstance(self._target, Exception):
            raise self._target
        return self._target


class _SyncExporter:
    name = "sync"

    def start(self) -> None: ...
    def export(self, push: AcceptedPush) -> None: ...
    def flush(self, timeout_s: float) -> None: ...
    def close(self, timeout_s: float) -> None: ...


def test_installed_plugins_load_through_entry_points(tmp_path: Path) -> None:
    loaded = load_exporters([("memory", {}), ("landing", {"roll_seconds": 1})], tmp_path)
    assert isinstance(loaded[0], InMemoryExporter)
    assert isinstance(loaded[1], LandingExporter)
    assert all(isinstance(e, Exporter) for e in loaded)


def test_unknown_plugin_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="'nosuch'"):
        load_exporter("nosuch", {}, tmp_path)


def test_bad_plugin_options_are_configuration_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="roll_bytes"):
        load_exporter("landing", {"roll_bytes": -1}, tmp_path)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (lambda options, data_dir: object(), "not an Exporter"),
        (lambda options, data_dir: _SyncExporter(), "must be async"),
        (ImportError("no module named broken"), "cannot be loaded"),
        ("not callable", "does not name a factory"),
    ],
)
def test_broken_plugins_are_rejected_on_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: object, message: str
) -> None:
    monkeypatch.setattr(
        registry, "available", lambda: {"broken": _FakeEntryPoint("broken", target)}
    )
    with pytest.raises(ConfigurationError, match=message) as info:
        load_exporter("broken", {}, tmp_path)
    assert "'broken'" in str(info.value)


async def test_memory_exporter_records_and_fails_on_demand(tmp_path: Path) -> None:
    exporter = registry.load_exporter("memory", {}, tmp_path)
    assert isinstance(exporter, InMemoryExporter)
    await exporter.start()
    await exporter.export(PUSH)
    exporter.fail_with(ExportError("disk on fire"))
    with pytest.raises(ExportError, match="disk on fire"):
        await exporter.export(PUSH)
    exporter.fail_with(None)
    await exporter.export(PUSH)
    await exporter.close(timeout_s=1)
    assert exporter.pushes == [PUSH, PUSH]
    with pytest.raises(ExportError):
        await exporter.export(PUSH)


async def test_memory_factory_fail_option(tmp_path: Path) -> None:
    options: Mapping[str, object] = {"fail": "always"}
    exporter = load_exporter("memory", options, tmp_path)
    await exporter.start()
    with pytest.raises(ExportError, match="always"):
        await exporter.export(PUSH)
    with pytest.raises(ConfigurationError):
        load_exporter("memory", {"nope": 1}, tmp_path)

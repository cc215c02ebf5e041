"""Exporter discovery through the ``clientmetrics.exporters`` entry-point group.

Each entry point names a factory ``(options, data_dir) -> Exporter``. What a plugin
returns is checked on load, so a broken plugin fails at startup with its name in
the message rather than on the first push.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from clientmetrics.errors import ConfigurationError
from clientmetrics.exporters.base import Exporter

GROUP = "clientmetrics.exporters"
_METHODS = ("start", "export", "flush", "close")

Factory = Callable[[Mapping[str, object], Path], object]


def available() -> dict[str, EntryPoint]:
    """Installed exporter plugins by name."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def load_exporter(name: str, options: Mapping[str, object], data_dir: Path) -> Exporter:
    """Build the exporter plugin ``name`` with ``options``; check what it returns."""
    plugins = available()
    if name not in plugins:
        known = ", ".join(sorted(plugins)) or "none"
        raise ConfigurationError(f"unknown exporter {name!r} (installed: {known})")
    try:
        factory = plugins[name].load()
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"exporter plugin {name!r} cannot be loaded: {exc}") from exc
    if not callable(factory):
        raise ConfigurationError(f"exporter plugin {name!r} does not name a factory")
    exporter = factory(options, data_dir)
    check_exporter(name, exporter)
    return exporter  # type: ignore[no-any-return]


def check_exporter(name: str, exporter: object) -> None:
    """Raise ``ConfigurationError`` unless ``exporter`` satisfies the Exporter protocol."""
    if not isinstance(exporter, Exporter):
        raise ConfigurationError(
            f"exporter plugin {name!r} returned {type(exporter).__name__}, which is not an "
            f"Exporter (needs a name and async {', '.join(_METHODS)})"
        )
    not_async = [m for m in _METHODS if not inspect.iscoroutinefunction(getattr(exporter, m))]
    if not_async:
        raise ConfigurationError(
            f"exporter plugin {name!r}: {', '.join(not_async)} must be async methods"
        )
    if not isinstance(exporter.name, str) or not exporter.name:
        raise ConfigurationError(f"exporter plugin {name!r} has no name")


def load_exporters(
    names_and_options: Sequence[tuple[str, Mapping[str, object]]], data_dir: Path
) -> list[Exporter]:
    """Build every configured exporter, in order."""
    return [load_exporter(name, options, data_dir) for name, options in names_and_options]

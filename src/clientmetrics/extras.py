"""Which optional extra installs which package, and the one-line error when one is missing.

``pip install clientmetrics`` gives the gateway (both modes), the admin tool, the
simulator, the reporter and the dashboard. The Spark pipeline and the demo need
the ``spark`` extra; commands that need it fail with one line naming it.
"""

from __future__ import annotations

import importlib.util

from clientmetrics.errors import ClientMetricsError

#: Top-level module -> the extra of ``clientmetrics`` that installs it.
EXTRAS: dict[str, str] = {
    "pyspark": "spark",
    "kafka": "kafka-python",
}


class MissingExtraError(ClientMetricsError):
    """An optional package is not installed; the message names the extra to install."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"needs {module}: pip install 'clientmetrics[{extra}]'")
        self.module = module
        self.extra = extra


def missing_extra(exc: ModuleNotFoundError) -> MissingExtraError | None:
    """The error to show for ``exc`` if it is an optional package that is missing."""
    top = (exc.name or "").partition(".")[0]
    extra = EXTRAS.get(top)
    return MissingExtraError(top, extra) if extra is not None else None


def require(module: str) -> None:
    """Raise ``MissingExtraError`` unless ``module`` (a key of ``EXTRAS``) is importable."""
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(module, EXTRAS[module])


__all__ = ["EXTRAS", "MissingExtraError", "missing_extra", "require"]

"""Structured logging for every command (structlog over the stdlib), on stderr."""

from __future__ import annotations

import logging
import sys

import structlog

#: ``auto`` is ``console`` when stderr is a terminal, else ``json``.
LOG_FORMATS = ("auto", "json", "console")


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    """Send structured log events to stderr, one JSON object (or console line) each."""
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    logging.basicConfig(level=level.upper(), stream=sys.stderr, format="%(message)s")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )

"""Structured logging for every command (structlog over the stdlib), on stderr.

A gateway process logs from its event loop, and a write to stderr blocks while
the reader of that pipe (a terminal, journald, a container runtime) is slow or
stalled: every client would wait with it. So the gateway configures
``background=True``: lines are rendered on the caller's thread and written by a
thread of their own, through a queue bounded in lines and in bytes (a line may
carry a claimed user name of hundreds of KB); when it is full, lines are
dropped and counted (one ``log_lines_dropped`` line says how many once the writer
catches up), never waited for. Lines queued at exit are written first.
"""

from __future__ import annotations

import atexit
import json
import logging
import queue
import sys
import threading
from typing import Any, TextIO

import structlog

#: ``auto`` is ``console`` when stderr is a terminal, else ``json``.
LOG_FORMATS = ("auto", "json", "console")
#: Lines waiting for the writer thread at most, and their characters.
MAX_QUEUED_LINES = 10_000
MAX_QUEUED_CHARS = 32 * 1024 * 1024

__all__ = ["LOG_FORMATS", "BackgroundWriter", "configure_logging"]


class BackgroundWriter:
    """Writes lines to ``stream`` on a thread of its own; ``write`` never blocks."""

    _STOP = object()

    def __init__(
        self,
        stream: TextIO,
        max_lines: int = MAX_QUEUED_LINES,
        max_chars: int = MAX_QUEUED_CHARS,
    ) -> None:
        self._stream = stream
        self._queue: queue.Queue[object] = queue.Queue(max_lines)
        self._lock = threading.Lock()
        self._max_chars = max_chars
        self._queued_chars = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="log-writer", daemon=True)
        self._thread.start()

    def write(self, line: str) -> None:
        with self._lock:
            if self._queued_chars + len(line) > self._max_chars:
                self.dropped += 1
                return
            self._queued_chars += len(line)
        try:
            self._queue.put_nowait(line)
        except queue.Full:
            with self._lock:
                self._queued_chars -= len(line)
                self.dropped += 1

    def _run(self) -> None:
        while True:
            line = self._queue.get()
            if line is self._STOP:  # what was dropped is said before the end
                try:
                    self._report_dropped()
                    self._stream.flush()
                except (OSError, ValueError):
                    pass
                return
            assert isinstance(line, str)
            with self._lock:
                self._queued_chars -= len(line)
            try:
                self._stream.write(f"{line}\n")
                if self._queue.empty():
                    self._report_dropped()
                    self._stream.flush()
            except (OSError, ValueError):  # stderr gone or closed: nothing to tell
                pass

    def _report_dropped(self) -> None:
        with self._lock:
            dropped, self.dropped = self.dropped, 0
        if dropped:
            line = json.dumps({"event": "log_lines_dropped", "count": dropped, "level": "warning"})
            self._stream.write(f"{line}\n")

    def close(self, timeout_s: float = 5.0) -> None:
        """Write what is queued (up to ``timeout_s``), then stop the thread."""
        if not self._thread.is_alive():
            return
        try:
            self._queue.put(self._STOP, timeout=timeout_s)
        except queue.Full:
            return
        self._thread.join(timeout_s)


class _LineLogger:
    """What structlog's logger factory returns: every level writes the rendered line."""

    def __init__(self, writer: BackgroundWriter) -> None:
        self._writer = writer

    def msg(self, message: str) -> None:
        self._writer.write(message)

    log = debug = info = warn = warning = err = error = critical = exception = fatal = msg


class _WriterHandler(logging.Handler):
    """The stdlib's log records (asyncio's own, libraries') through the same writer."""

    def __init__(self, writer: BackgroundWriter) -> None:
        super().__init__()
        self._writer = writer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._writer.write(self.format(record))
        except Exception:  # the stdlib's own policy for a failing handler
            self.handleError(record)


def configure_logging(level: str = "info", fmt: str = "auto", *, background: bool = False) -> None:
    """Send structured log events to stderr, one JSON object (or console line) each.

    ``background``: written by a thread of their own (see the module's docstring).
    """
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "json"
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    factory: Any = structlog.PrintLoggerFactory(sys.stderr)
    if background:
        writer = BackgroundWriter(sys.stderr)
        atexit.register(writer.close)
        handler: logging.Handler = _WriterHandler(writer)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
        factory = lambda *_args: _LineLogger(writer)  # noqa: E731
    else:
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
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )

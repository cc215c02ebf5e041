"""Fail-open exporters in a child process of their own, out of the worker's way.

Decoding payloads, folding series, encoding OTLP and producing to a topic cost
several times what landing a push does. Run on the gateway's event loop they
would take its time, and so delay answers. So the gateway only frames each
acknowledged push as a WAL record (``wal.encode_record``) and writes it to a
socket; a spawned child process, off the worker's cores when there are others
and at a lower CPU priority once its exporters have started (``lifeline``), runs
the exporters on its own loop. When the socket backlog passes ``backlog_bytes``
the gateway drops the push and counts it, as each exporter's own queue does in
the child: the push path never waits.

The child sends back, as JSON lines on the same socket, its exporters' counters
(every ``STATS_EVERY_S``) and its log events, which the gateway logs as its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import socket
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import structlog

from clientmetrics.errors import ConfigurationError, ListenError
from clientmetrics.exporters.base import Exporter, ExportError
from clientmetrics.exporters.queued import ExporterStats, QueuedExporter
from clientmetrics.exporters.registry import load_exporter
from clientmetrics.exporters.wal import RECORD_HEADER, check_record, decode_record, encode_record
from clientmetrics.lifeline import child_started, lower_priority
from clientmetrics.telemetry.model import AcceptedPush

log = structlog.get_logger(__name__)

STATS_EVERY_S = 0.5
_COUNTERS = ("exported", "failed", "dropped", "queue_depth")
_TIMING = ("export_seconds_sum", "export_seconds_count", "export_seconds_max")

Specs = Sequence[tuple[str, Mapping[str, object]]]


class ChildExporters:
    """The gateway's side: offers pushes to the exporters running in the child."""

    name = "exporter-process"

    def __init__(self, specs: Specs, data_dir: Path, backlog_bytes: int = 32 * 2**20) -> None:
        self.specs = [(name, dict(options)) for name, options in specs]
        self.names = [name for name, _ in specs]
        self._data_dir = data_dir
        self._backlog = backlog_bytes
        self._stats = {name: ExporterStats(name) for name in self.names}
        self._child: dict[str, dict[str, Any]] = {name: {} for name in self.names}
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._records = 0
        self._dropped = 0
        self._wake = asyncio.Event()
        self._started = asyncio.Event()
        self._start_error: str | None = None
        #: The child's start failed on a taken address (``ListenError``), not a setting.
        self._start_listen_error = False
        self._writer: asyncio.StreamWriter | None = None
        self._lost = False
        self._tasks: list[asyncio.Task[None]] = []
        self._proc: Any = None

    async def start(self) -> None:
        """Spawn the child; return once it has started every exporter (or raise)."""
        ours, theirs = socket.socketpair()
        ctx = multiprocessing.get_context("spawn")
        self._proc = ctx.Process(
            target=child_main,
            args=(os.getpid(), theirs, self.specs, str(self._data_dir)),
            name="clientmetrics-exporters",
            daemon=True,
        )
        self._proc.start()
        theirs.close()
        reader, self._writer = await asyncio.open_connection(sock=ours)
        self._tasks = [
            asyncio.create_task(self._read(reader), name="exporter-process-read"),
            asyncio.create_task(self._write(), name="exporter-process-write"),
        ]
        try:
            await asyncio.wait_for(self._started.wait(), 60)
        except TimeoutError:
            self._start_error = "the exporter process did not start in 60 s"
        if self._start_error is not None:
            await self.close(5)
            if self._start_listen_error:
                raise ListenError(self._start_error)
            raise ConfigurationError(self._start_error)
        log.info("exporter_process_started", pid=self._proc.pid, exporters=self.names)

    def offer(self, push: AcceptedPush) -> None:
        """Queue ``push`` for the child without waiting; drop and count past the backlog."""
        for stats in self._stats.values():
            stats.received += 1
        if self._buffered >= self._backlog or self._writer is None or self._lost:
            self._dropped += 1
            return
        record = encode_record(push)
        self._chunks.append(record)
        self._buffered += len(record)
        self._records += 1
        self._wake.set()

    async def export(self, push: AcceptedPush) -> None:
        """Fail-open: ``offer``."""
        self.offer(push)

    async def _write(self) -> None:
        writer = self._writer
        assert writer is not None
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                if not self._chunks:
                    continue
                chunks, self._chunks = self._chunks, []
                self._buffered -= sum(map(len, chunks))
                self._records -= len(chunks)
                # One chunk at a time waits in the transport (drain), so at most twice
                # the backlog is held here while the child is slow.
                writer.write(b"".join(chunks))
                await writer.drain()
        except (ConnectionError, OSError) as exc:
            # The child died: from now on every push is dropped (and counted).
            self._lost = True
            self._dropped += self._records
            self._chunks, self._buffered, self._records = [], 0, 0
            log.error("exporter_process_lost", error=repr(exc), exporters=self.names)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            message = json.loads(line)
            kind = message.pop("t")
            if kind == "stats":
                self._child.update(message["stats"])
            elif kind == "log":
                level = message.pop("level", "info")
                event = message.pop("event", "exporter_process_log")
                log.log(_LEVELS.get(level, 20), event, **message)
            elif kind == "started":
                self._started.set()
            elif kind == "error":
                self._start_error = str(message["error"])
                self._start_listen_error = bool(message.get("listen"))
                self._started.set()
        self._started.set()

    def exporter_stats(self) -> list[ExporterStats]:
        """Each child exporter's counters: received and backlog here, the rest the child's."""
        out = []
        for name in self.names:
            stats, child = self._stats[name], self._child[name]
            stats.exported = int(child.get("exported", 0))
            stats.failed = int(child.get("failed", 0))
            stats.dropped = self._dropped + int(child.get("dropped", 0))
            stats.queue_depth = self._records + int(child.get("queue_depth", 0))
            stats.export_seconds_sum = float(child.get("export_seconds_sum", 0.0))
            stats.export_seconds_count = int(child.get("export_seconds_count", 0))
            stats.export_seconds_max = float(child.get("export_seconds_max", 0.0))
            stats.extra = dict(child.get("extra", {}))
            out.append(stats)
        return out

    async def flush(self, timeout_s: float) -> None:
        """Wait (up to ``timeout_s``) until the backlog is written to the child."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self._chunks and loop.time() < deadline:
            await asyncio.sleep(0.01)

    async def close(self, timeout_s: float) -> None:
        """Hand over the backlog, end the stream; the child flushes its exporters and exits."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        await self.flush(timeout_s / 2)
        writer = self._writer
        if writer is not None:
            with contextlib.suppress(OSError, RuntimeError):
                writer.write_eof()
        if self._tasks:  # the reader ends when the child closes its side
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    asyncio.shield(self._tasks[0]), max(0.1, deadline - loop.time())
                )
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._writer is not None:
            self._writer.close()
        if self._proc is not None:
            await asyncio.to_thread(self._proc.join, max(0.1, deadline - loop.time()))
            if self._proc.is_alive():
                self._proc.kill()
                await asyncio.to_thread(self._proc.join, 5)
        if self._dropped:
            log.warning("exporter_process_backlog_dropped", dropped=self._dropped)


_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def child_main(parent_pid: int, sock: socket.socket, specs: Specs, data_dir: str) -> None:
    """The child process: die with the gateway, step out of its way (other cores at
    once; a lower priority once its exporters have started: niced, behind a busy
    machine's work, their imports held the gateway's start for seconds), then run
    the exporters until the stream ends."""
    child_started(parent_pid, background=True)
    asyncio.run(_serve(sock, specs, Path(data_dir)))


async def _serve(sock: socket.socket, specs: Specs, data_dir: Path) -> None:
    reader, writer = await asyncio.open_connection(sock=sock)

    def send(message: dict[str, Any]) -> None:
        writer.write(json.dumps(message, default=str).encode() + b"\n")

    _forward_logs(send)
    exporters: list[QueuedExporter] = []
    try:
        for name, options in specs:
            exporter = load_exporter(name, options, data_dir)
            if not isinstance(exporter, QueuedExporter):
                raise ConfigurationError(f"exporter {name!r} cannot run in the exporter process")
            await exporter.start()
            exporters.append(exporter)
    except (ConfigurationError, ExportError, ListenError) as exc:
        send({"t": "error", "error": str(exc), "listen": isinstance(exc, ListenError)})
        await writer.drain()
        writer.close()
        return
    lower_priority()
    send({"t": "started"})
    reporter = asyncio.create_task(_report(send, exporters))
    try:
        await _pump(reader, exporters)
    finally:
        reporter.cancel()
        for exporter in exporters:
            with contextlib.suppress(Exception):
                await exporter.close(10)
        send(_stats_message(exporters))
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()


async def _pump(reader: asyncio.StreamReader, exporters: list[QueuedExporter]) -> None:
    size = RECORD_HEADER.size
    while True:
        try:
            header = await reader.readexactly(size)
            (length, _) = RECORD_HEADER.unpack(header)
            body = await reader.readexactly(length)
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # the gateway closed the stream: finish up
        if not check_record(header, body):
            raise ExportError("corrupt record from the gateway")
        push = decode_record(body)
        for exporter in exporters:
            exporter.offer(push)


async def _report(send: Any, exporters: list[QueuedExporter]) -> None:
    while True:
        await asyncio.sleep(STATS_EVERY_S)
        send(_stats_message(exporters))


def _stats_message(exporters: list[QueuedExporter]) -> dict[str, Any]:
    stats: dict[str, Any] = {}
    for exporter in exporters:
        s = exporter.exporter_stats()[0]
        stats[s.name] = {k: getattr(s, k) for k in (*_COUNTERS, *_TIMING)} | {"extra": s.extra}
    return {"t": "stats", "stats": stats}


def _forward_logs(send: Any) -> None:
    """Log events go to the gateway, which logs them in its own format."""
    loop = asyncio.get_running_loop()

    def forward(_logger: Any, method: str, event: MutableMapping[str, Any]) -> str:
        message = {"t": "log", "level": method, **event}
        loop.call_soon_threadsafe(send, message)
        raise structlog.DropEvent

    structlog.configure(processors=[forward], cache_logger_on_first_use=False)


def with_exporter_process(
    exporters: Sequence[Exporter], specs: Specs, data_dir: Path
) -> list[Exporter]:
    """``exporters`` (built from ``specs``) with the fail-open ones moved to one child.

    Building them here first checks their options at startup, in the gateway.
    """
    moved = [
        (spec, e)
        for spec, e in zip(specs, exporters, strict=True)
        if isinstance(e, QueuedExporter) and not e.required
    ]
    if not moved:
        return list(exporters)
    child = ChildExporters([spec for spec, _ in moved], data_dir)
    kept: list[Exporter] = [e for e in exporters if all(e is not m for _, m in moved)]
    return [*kept, child]

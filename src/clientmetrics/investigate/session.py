"""One watch from start to finish: create, show points live, narrow, delete, see clients go back.

The watch is deleted however the session ends (expiry, ``--duration``, Ctrl-C,
``stop`` on stdin); if the process dies instead, the watch's name still carries
its expiry and any reaper deletes it. While it runs, the session reaps every
expired watch once a ``REAP_EVERY_S``, so a watch left by a crashed session
goes within that of its expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from clientmetrics.admin import AdminConfig, AsyncAdmin
from clientmetrics.investigate import watches as w
from clientmetrics.investigate.live import Selection, Shapes, back_on, live_points, warm_up
from clientmetrics.investigate.tail import LandingTail

__all__ = ["REAP_EVERY_S", "Tail", "WatchSession"]

#: How often a running session deletes expired watches (well inside a minute).
REAP_EVERY_S = 30.0
#: How often the landing zone is looked at: bounds the push-acknowledged -> shown delay.
POLL_S = 0.2
#: How long, after deleting, to wait for each client's first push on its next subscription.
BACK_WAIT_S = 60.0


class Tail(Protocol):
    """Where the live view reads pushes: the landing zone (``LandingTail``) or the
    telemetry topic (``topic.TopicTail``)."""

    def read(self) -> pa.Table:
        """Landing rows acknowledged since the last call."""
        ...


@dataclass
class WatchSession:
    """A watch and its live view. ``echo`` prints one line."""

    config: AdminConfig
    data_dir: Path
    owner: str
    selectors: dict[str, str]
    metrics: list[str]
    interval_ms: int
    expires_s: float
    echo: Callable[[str], None]
    #: Where warnings go (stderr from the command); the live lines stay on ``echo``.
    warn: Callable[[str], None] = print
    #: Where pushes are read; None: the landing zone of ``data_dir``.
    source: Tail | None = None
    #: The watch while it exists; ``deleted`` once it is gone.
    watch: w.Watch | None = None
    deleted: w.Watch | None = None
    #: Per watched instance, its latest push shown.
    _seen: Shapes = field(default_factory=Shapes)
    _commands: asyncio.Queue[str] = field(default_factory=lambda: asyncio.Queue(16))
    #: Set by the first Ctrl-C/SIGTERM: the live view ends at its next step.
    _interrupted: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, stop_after_s: float | None = None) -> None:
        """Create the watch, show points until expiry / ``stop_after_s`` / stop, then delete."""
        await asyncio.to_thread(warm_up)
        tail = self.source
        if tail is None:
            landing = tail = LandingTail(self.data_dir)
            if not landing.layout.root.is_dir():
                self.echo(
                    f"no landing zone in {self.data_dir}: live points need the gateway's "
                    "data dir, or --topic for a deployment that writes the telemetry topic"
                )
        selection = Selection(self.selectors, self.metrics)
        async with AsyncAdmin(self.config) as admin:
            await self._reap(admin)
            expires_at_ms = int((time.time() + self.expires_s) * 1000)
            self.watch = await w.create_watch(
                admin,
                owner=self.owner,
                selectors=self.selectors,
                metrics=self.metrics,
                interval_ms=self.interval_ms,
                expires_at_ms=expires_at_ms,
            )
            self.echo(
                f"watching {self.watch.name} until {self.watch.expires_text}: "
                f"match {','.join(w.watch_match(self.selectors))}, metrics "
                f"{','.join(self.metrics)}, interval {self.interval_ms} ms"
            )
            end = time.monotonic() + min(self.expires_s, stop_after_s or self.expires_s)
            self._listen_stdin()
            try:
                with self._signals_stop():
                    selection = await self._follow(admin, tail, selection, end)
            finally:
                stopped_ms = int(time.time() * 1000)  # before the delete is sent
                await asyncio.shield(self._delete(admin))
            if not self._interrupted.is_set():
                await self._back(tail, selection, stopped_ms)

    @contextlib.contextmanager
    def _signals_stop(self) -> Iterator[None]:
        """The first SIGINT/SIGTERM ends the live view at its next step (then the watch is
        deleted), the second cancels at once. A cancellation thrown into the middle of an
        await can be lost (``wait_for`` in Python 3.11 may swallow it when its timeout
        fires at the same moment): a flag cannot."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()

        def interrupted() -> None:
            if self._interrupted.is_set() and task is not None:
                task.cancel()
            self._interrupted.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, interrupted)
        try:
            yield
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    async def _follow(
        self, admin: AsyncAdmin, tail: Tail, selection: Selection, end: float
    ) -> Selection:
        next_reap = time.monotonic() + REAP_EVERY_S
        while time.monotonic() < end and not self._interrupted.is_set():
            rows = await asyncio.to_thread(tail.read)
            for point in live_points(rows, selection):
                self._seen.add(point)
                self.echo(point.line())
            if time.monotonic() >= next_reap:
                await self._reap(admin)
                next_reap = time.monotonic() + REAP_EVERY_S
            command = await self._next_command()
            if command is not None:
                words = command.split()
                if words[:1] == ["stop"]:
                    break
                if words[:1] == ["narrow"] and len(words) == 2:
                    selection = await self._narrow(admin, words[1])
        return selection

    async def _next_command(self) -> str | None:
        """A line from stdin, or None after ``POLL_S`` or once interrupted."""
        get = asyncio.ensure_future(self._commands.get())
        stop = asyncio.ensure_future(self._interrupted.wait())
        done, _ = await asyncio.wait({get, stop}, timeout=POLL_S, return_when="FIRST_COMPLETED")
        stop.cancel()
        if get in done:
            return get.result()
        get.cancel()
        return None

    async def _narrow(self, admin: AsyncAdmin, instance: str) -> Selection:
        """Match one ``client_instance_id`` only (the subscription and the view)."""
        if self.watch is None:
            return Selection(self.selectors, self.metrics)
        try:
            pattern = w.instance_pattern(instance)
        except ValueError as exc:
            self.echo(f"not narrowed: {exc}")
            return Selection(self.selectors, self.metrics)
        self.selectors = {"client_instance_id": pattern}
        await w.narrow_watch(admin, self.watch, self.selectors)
        self.echo(f"narrowed {self.watch.name} to client_instance_id={instance}")
        self._seen.keep(instance)
        return Selection(self.selectors, self.metrics)

    async def _reap(self, admin: AsyncAdmin) -> None:
        for gone in await w.reap(admin, int(time.time() * 1000)):
            self.echo(f"reaped {gone.name} (owner {gone.owner}, expired {gone.expires_text})")

    async def _delete(self, admin: AsyncAdmin) -> None:
        if self.watch is not None:
            await admin.delete(self.watch.name)
            self.echo(f"deleted {self.watch.name}")
            self.deleted, self.watch = self.watch, None

    async def cleanup(self) -> None:
        """Delete the watch on a fresh connection (after an interrupted run)."""
        if self.watch is not None:
            async with AsyncAdmin(self.config) as admin:
                await self._delete(admin)

    async def _back(self, tail: Tail, selection: Selection, stopped_ms: int) -> None:
        """Show each watched client's first push on a subscription other than the watch's."""
        waiting = dict(self._seen.latest)
        deadline = time.monotonic() + BACK_WAIT_S
        while waiting and time.monotonic() < deadline:
            rows = await asyncio.to_thread(tail.read)
            for instance, back in back_on(rows, waiting, selection, stopped_ms).items():
                self.echo(f"back {instance} {back.text()}")
                del waiting[instance]
            await asyncio.sleep(POLL_S)
        for instance in waiting:
            self.echo(f"not seen back within {BACK_WAIT_S:.0f} s: {instance}")

    def _listen_stdin(self) -> None:
        """Lines on stdin (``narrow ID``, ``stop``) become commands; EOF is ignored."""
        loop = asyncio.get_running_loop()

        def read() -> None:
            for line in sys.stdin:
                if line.strip():
                    loop.call_soon_threadsafe(self._offer, line.strip())

        threading.Thread(target=read, name="investigate-stdin", daemon=True).start()

    def _offer(self, command: str) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            self._commands.put_nowait(command)

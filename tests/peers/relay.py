"""A TCP relay for tests that holds what the server sends for a while: a slow broker.

Clients connect to the relay, the relay to one upstream (a Kafka broker). Bytes
from the client go up at once; every chunk the upstream sends back is held for
``delay`` seconds (read at any moment) before it is passed on, in order. So each
response reaches the client ``delay`` late and the clients' own request latency
metrics rise, whatever the requests are. It runs its own event loop in a thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

#: Chunks held per connection before the relay stops reading its upstream (a bound).
HELD_CHUNKS = 1024


@dataclass
class DelayRelay:
    """Listens on 127.0.0.1:``port`` (0: any free port) and relays to ``upstream``."""

    upstream_host: str
    upstream_port: int
    port: int = 0
    #: Seconds each chunk from the upstream is held; may change at any time.
    delay: float = 0.0
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def start(self) -> DelayRelay:
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._serve, "127.0.0.1", self.port)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="delay-relay", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the relay did not start")
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        if self._thread is not None:
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
            self._loop.close()
        self._thread = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(
                self.upstream_host, self.upstream_port
            )
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        held: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(HELD_CHUNKS)
        pumps = [
            asyncio.create_task(self._pump(reader, up_writer)),
            asyncio.create_task(self._hold(up_reader, held)),
            asyncio.create_task(self._release(held, writer)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            for side in (writer, up_writer):
                side.close()
            self._tasks.discard(task)

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()

    async def _hold(
        self, reader: asyncio.StreamReader, held: asyncio.Queue[tuple[float, bytes]]
    ) -> None:
        while data := await reader.read(65536):
            await held.put((time.monotonic() + self.delay, data))
        await held.put((0.0, b""))  # the upstream closed: pass that on after the rest

    @staticmethod
    async def _release(
        held: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter
    ) -> None:
        while True:
            due, data = await held.get()
            if not data:
                return
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            writer.write(data)
            await writer.drain()

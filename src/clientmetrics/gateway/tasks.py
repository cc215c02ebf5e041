"""The tasks a server owns: each forgotten when it ends, every one cancelled on close."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["OwnedTasks"]


class OwnedTasks:
    """Background and per-connection tasks of one server (the gateway, the proxy)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as a task this owner cancels on close."""
        self.adopt(asyncio.ensure_future(coro))

    def adopt(self, task: asyncio.Task[Any]) -> None:
        """Own a task started elsewhere (a connection handler asyncio started)."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def cancel(self, timeout: float) -> None:
        """Cancel every unfinished task; wait up to ``timeout`` for them to end."""
        tasks = [t for t in self._tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

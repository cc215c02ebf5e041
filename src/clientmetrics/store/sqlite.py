"""The default subscription store: one SQLite file, shared safely by several gateways.

Every sqlite3 call runs on one dedicated worker thread (a connection may only be
used by the thread that made it), so the event loop never blocks on disk. The
database uses WAL journaling with ``synchronous=FULL``, so a ``put`` that returned
survives a power cut. Changes made by another process sharing the file are picked
up by polling ``PRAGMA data_version``, which changes only when another connection
commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from clientmetrics.store.base import Change, ChangeListener, ConfigMap, StoreError

_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS client_metrics_configs (
    name TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (name, key)
) WITHOUT ROWID
"""

Resources = dict[str, dict[str, str]]


class SqliteSubscriptionStore:
    """A ``SubscriptionStore`` kept in the SQLite database at ``path``."""

    def __init__(self, path: Path, poll_interval_s: float = 1.0) -> None:
        self._path = path
        self._poll_interval_s = poll_interval_s
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._on_change: ChangeListener | None = None
        self._known: Resources = {}
        self._data_version = 0
        self._poller: asyncio.Task[None] | None = None

    async def start(self, on_change: ChangeListener) -> Resources:
        """Open (creating if needed) the database and return every resource."""
        if self._executor is not None:
            raise StoreError("the store is already started")
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="sqlite-store")
        self._on_change = on_change
        try:
            await self._call(self._open)
            self._known, self._data_version = await self._call(self._snapshot)
        except StoreError:
            await self.close()
            raise
        if self._poll_interval_s > 0:
            self._poller = asyncio.create_task(self._poll(), name="sqlite-store-poll")
        return {name: dict(configs) for name, configs in self._known.items()}

    async def put(self, name: str, configs: ConfigMap) -> None:
        """Replace ``name``'s configs in one committed transaction; empty deletes it."""
        fixed = dict(configs)
        await self.update(name, lambda _stored: fixed)

    async def update(self, name: str, change: Change) -> dict[str, str]:
        """Read, change and write ``name``'s configs in one write transaction.

        ``BEGIN IMMEDIATE`` takes the database's write lock before the read, so
        no other connection (another worker or gateway) commits in between.
        """
        new = await self._call(lambda: self._update(name, change))
        if self._known.get(name, {}) != new:
            self._remember(name, new)
            self._notify(name, new)
        return new

    async def close(self) -> None:
        """Stop polling and close the database."""
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None
        if self._executor is None:
            return
        with contextlib.suppress(StoreError):
            await self._call(self._close_connection)
        self._executor.shutdown(wait=True)
        self._executor = None

    async def _call(self, func: Callable[[], _T]) -> _T:
        if self._executor is None:
            raise StoreError("the store is not started")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, func)
        except sqlite3.Error as exc:
            raise StoreError(f"subscription store {self._path}: {exc}") from exc
        except OSError as exc:
            raise StoreError(f"subscription store {self._path}: {exc}") from exc

    # --- worker-thread side -------------------------------------------------------

    def _open(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self._path, isolation_level=None, timeout=30.0)
        try:
            _enable_wal(conn)
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute(_SCHEMA)
        except sqlite3.Error:
            conn.close()
            raise
        self._conn = conn

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise sqlite3.ProgrammingError("the database is closed")
        return self._conn

    def _snapshot(self) -> tuple[Resources, int]:
        conn = self._connection()
        # One read transaction so the rows and the version belong together.
        conn.execute("BEGIN")
        try:
            rows = conn.execute(
                "SELECT name, key, value FROM client_metrics_configs ORDER BY name, key"
            ).fetchall()
            version = conn.execute("PRAGMA data_version").fetchone()[0]
        finally:
            conn.execute("COMMIT")
        resources: Resources = {}
        for name, key, value in rows:
            resources.setdefault(name, {})[key] = value
        return resources, int(version)

    def _update(self, name: str, change: Change) -> dict[str, str]:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            stored = dict(
                conn.execute(
                    "SELECT key, value FROM client_metrics_configs WHERE name = ?", (name,)
                ).fetchall()
            )
            new = dict(change(dict(stored)))
            if new != stored:
                conn.execute("DELETE FROM client_metrics_configs WHERE name = ?", (name,))
                conn.executemany(
                    "INSERT INTO client_metrics_configs (name, key, value) VALUES (?, ?, ?)",
                    [(name, key, value) for key, value in sorted(new.items())],
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # a failed COMMIT (disk full) can leave it open
                conn.execute("ROLLBACK")
            raise
        return new

    def _data_version_now(self) -> int:
        return int(self._connection().execute("PRAGMA data_version").fetchone()[0])

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # --- change propagation -------------------------------------------------------

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self._poll_interval_s)
            try:
                await self._refresh()
            except StoreError:
                # A transient read failure must not stop change propagation; the
                # next poll retries. Writers see their own errors through put().
                continue

    async def _refresh(self) -> None:
        if await self._call(self._data_version_now) == self._data_version:
            return
        resources, self._data_version = await self._call(self._snapshot)
        for name in sorted(self._known.keys() | resources.keys()):
            new = resources.get(name, {})
            if self._known.get(name, {}) != new:
                self._remember(name, new)
                self._notify(name, new)

    def _remember(self, name: str, configs: dict[str, str]) -> None:
        if configs:
            self._known[name] = configs
        else:
            self._known.pop(name, None)

    def _notify(self, name: str, configs: dict[str, str]) -> None:
        if self._on_change is not None:
            self._on_change(name, dict(configs))


def _enable_wal(conn: sqlite3.Connection, attempts: int = 100) -> None:
    """Switch to WAL, retrying while another process opens the same fresh file.

    Changing the journal mode needs an exclusive lock and SQLite answers "database
    is locked" at once, without its busy handler, when several gateway workers
    start together on a new data directory.
    """
    for attempt in range(attempts):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.05 + random.random() * 0.05)

"""The subscription stores: durability, deletes, concurrency, corruption, change events."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from clientmetrics.store import (
    MemorySubscriptionStore,
    SqliteSubscriptionStore,
    StoreError,
    SubscriptionStore,
)
from clientmetrics.store.base import ConfigMap

Changes = list[tuple[str, dict[str, str]]]


def _recorder() -> tuple[Changes, Callable[[str, ConfigMap], None]]:
    changes: Changes = []
    return changes, lambda name, configs: changes.append((name, dict(configs)))


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteSubscriptionStore]:
    store = SqliteSubscriptionStore(tmp_path / "subs.db", poll_interval_s=0.02)
    yield store
    await store.close()


async def test_sqlite_round_trip_survives_restart(tmp_path: Path) -> None:
    path = tmp_path / "d" / "subs.db"
    first = SqliteSubscriptionStore(path)
    assert await first.start(lambda n, c: None) == {}
    await first.put("a", {"metrics": "org.apache.kafka.", "interval.ms": "1000"})
    await first.put("b", {"match": "client_id=x=y"})
    await first.close()

    second = SqliteSubscriptionStore(path)
    loaded = await second.start(lambda n, c: None)
    await second.close()
    assert loaded == {
        "a": {"metrics": "org.apache.kafka.", "interval.ms": "1000"},
        "b": {"match": "client_id=x=y"},
    }


async def test_sqlite_uses_wal_and_full_sync(tmp_path: Path) -> None:
    store = SqliteSubscriptionStore(tmp_path / "subs.db")
    await store.start(lambda n, c: None)
    await store.put("a", {"metrics": "x"})
    await store.close()
    conn = sqlite3.connect(tmp_path / "subs.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


async def test_put_replaces_the_whole_map(sqlite_store: SqliteSubscriptionStore) -> None:
    await sqlite_store.start(lambda n, c: None)
    await sqlite_store.put("a", {"metrics": "x", "interval.ms": "1000"})
    await sqlite_store.put("a", {"match": "client_id=z"})
    await sqlite_store.close()
    assert await sqlite_store.start(lambda n, c: None) == {"a": {"match": "client_id=z"}}


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_empty_put_deletes_and_notifies(tmp_path: Path, kind: str) -> None:
    store: SubscriptionStore = (
        SqliteSubscriptionStore(tmp_path / "s.db")
        if kind == "sqlite"
        else MemorySubscriptionStore()
    )
    changes, listener = _recorder()
    await store.start(listener)
    await store.put("a", {"metrics": "x"})
    await store.put("b", {"metrics": "y"})
    await store.put("a", {})
    await store.close()
    assert changes == [("a", {"metrics": "x"}), ("b", {"metrics": "y"}), ("a", {})]
    assert await store.start(listener) == {"b": {"metrics": "y"}}
    await store.close()


async def test_concurrent_puts_all_land(tmp_path: Path) -> None:
    path = tmp_path / "subs.db"
    store = SqliteSubscriptionStore(path)
    changes, listener = _recorder()
    await store.start(listener)
    await asyncio.gather(
        *(
            store.put(f"sub{i}", {"metrics": f"m{i}", "interval.ms": str(100 + i)})
            for i in range(50)
        )
    )
    await store.close()
    assert len(changes) == 50
    reopened = SqliteSubscriptionStore(path)
    loaded = await reopened.start(listener)
    await reopened.close()
    assert loaded == {
        f"sub{i}": {"metrics": f"m{i}", "interval.ms": str(100 + i)} for i in range(50)
    }


async def test_two_stores_on_one_file_see_each_others_changes(tmp_path: Path) -> None:
    path = tmp_path / "subs.db"
    writer = SqliteSubscriptionStore(path, poll_interval_s=0.02)
    reader = SqliteSubscriptionStore(path, poll_interval_s=0.02)
    changes, listener = _recorder()
    await writer.start(lambda n, c: None)
    await reader.start(listener)
    await asyncio.gather(writer.put("a", {"metrics": "x"}), writer.put("b", {"metrics": "y"}))
    await writer.put("a", {})

    def folded() -> dict[str, dict[str, str]]:
        state: dict[str, dict[str, str]] = {}
        for name, configs in changes:
            state[name] = configs
        return {name: configs for name, configs in state.items() if configs}

    for _ in range(6000):  # 60 s at most: generous for a busy machine
        if folded() == {"b": {"metrics": "y"}}:
            break
        await asyncio.sleep(0.01)
    await writer.close()
    await reader.close()
    # Polling may coalesce a's add and delete; what counts is the state it converges to.
    assert folded() == {"b": {"metrics": "y"}}


async def test_corrupt_database_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "subs.db"
    path.write_bytes(b"this is not a database at all" * 200)
    store = SqliteSubscriptionStore(path)
    with pytest.raises(StoreError) as info:
        await store.start(lambda n, c: None)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)
    await store.close()


async def test_put_before_start_raises_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        await SqliteSubscriptionStore(tmp_path / "s.db").put("a", {"metrics": "x"})
    with pytest.raises(StoreError):
        await MemorySubscriptionStore().put("a", {"metrics": "x"})


async def test_unwritable_location_raises_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    store = SqliteSubscriptionStore(blocker / "subs.db")
    with pytest.raises(StoreError):
        await store.start(lambda n, c: None)
    await store.close()


async def test_memory_store_initial_contents() -> None:
    store = MemorySubscriptionStore({"a": {"metrics": "x"}, "gone": {}})
    assert await store.start(lambda n, c: None) == {"a": {"metrics": "x"}}


def _open_store_at_once(path: str, barrier: Any, results: Any) -> None:
    import asyncio as aio

    from clientmetrics.store.sqlite import SqliteSubscriptionStore as Store

    async def main() -> None:
        store = Store(Path(path))
        barrier.wait()
        await store.start(lambda name, configs: None)
        await store.put(f"from-{os.getpid()}", {"metrics": "org.apache.kafka."})
        await store.close()

    try:
        aio.run(main())
        results.put("ok")
    except Exception as exc:  # reported to the test, which fails on it
        results.put(repr(exc))


def test_workers_opening_a_new_store_together_all_succeed(tmp_path: Path) -> None:
    """Gateway workers start at once on a fresh data dir: none may fail on the lock."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    path = str(tmp_path / "subscriptions.db")
    procs = [
        ctx.Process(target=_open_store_at_once, args=(path, barrier, results)) for _ in range(4)
    ]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(10)
    assert outcomes == ["ok"] * 4


def _append(item: str) -> Callable[[dict[str, str]], dict[str, str]]:
    def change(stored: dict[str, str]) -> dict[str, str]:
        listed = [m for m in stored.get("metrics", "").split(",") if m]
        return {**stored, "metrics": ",".join([*listed, item])}

    return change


async def test_sqlite_updates_from_two_stores_on_one_file_all_land(tmp_path: Path) -> None:
    """Read-modify-write in one write transaction: no lost update between processes."""
    path = tmp_path / "subs.db"
    stores = [SqliteSubscriptionStore(path, poll_interval_s=0) for _ in range(2)]
    for store in stores:
        await store.start(lambda n, c: None)

    async def writer(store: SqliteSubscriptionStore, who: int) -> None:
        for i in range(25):
            await store.update("shared", _append(f"s{who}.m{i}"))

    try:
        await asyncio.gather(*(writer(s, who) for who, s in enumerate(stores)))
        final = await stores[0].update("shared", lambda stored: stored)
    finally:
        for store in stores:
            await store.close()
    assert set(final["metrics"].split(",")) == {f"s{w}.m{i}" for w in range(2) for i in range(25)}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_failing_change_writes_nothing(tmp_path: Path, kind: str) -> None:
    store: SubscriptionStore = (
        MemorySubscriptionStore()
        if kind == "memory"
        else SqliteSubscriptionStore(tmp_path / "s.db")
    )
    await store.start(lambda n, c: None)
    try:
        await store.put("a", {"metrics": "x"})

        def refuse(stored: dict[str, str]) -> dict[str, str]:
            raise ValueError("invalid")

        with pytest.raises(ValueError, match="invalid"):
            await store.update("a", refuse)
        assert await store.update("a", lambda stored: stored) == {"metrics": "x"}
    finally:
        await store.close()

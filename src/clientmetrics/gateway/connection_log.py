"""The gateway's connection records: every client it serves, landed beside the pushes.

Each closing connection is counted in a bounded ``ConnectionTable`` (a dict
update on the event loop); every ``connection_records_interval_ms`` the open
connections are counted too, the table is drained and its records (at most
``connection_records_max_keys``) are written as one Parquet file under
``DATA/landing/connections/date=…/hour=…/`` on a worker thread, atomically
(written beside, fsynced, renamed). docs/record-format.md defines the record.
"""

from __future__ import annotations

import asyncio
import functools
import os
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import structlog

from clientmetrics.exporters.landing_files import fsync_dir, make_dirs
from clientmetrics.gateway.config import GatewayConfig
from clientmetrics.gateway.connection_topic import ConnectionTopic, connection_topic
from clientmetrics.gateway.handlers import ConnectionState
from clientmetrics.gateway.limits import now_ms
from clientmetrics.telemetry.connections import (
    NO_USAGE,
    ClientKey,
    ConnectionRecord,
    ConnectionTable,
    Usage,
    instance_text,
    landed_connections,
    records_to_arrow,
)
from clientmetrics.telemetry.manager import ClientMetricsManager
from clientmetrics.telemetry.push_arrow import partition
from clientmetrics.wire import ApiKey, RequestHeader, response_header_version
from clientmetrics.wire.errors import ProtocolError
from clientmetrics.wire.fetch_walk import COUNTED, consumed_by
from clientmetrics.wire.headers import parse_response_header
from clientmetrics.wire.produce_walk import acknowledged, produced_parts, total
from clientmetrics.wire.record_batches import Totals
from clientmetrics.wire.results import NO_RESPONSE, Request

log = structlog.get_logger("clientmetrics.gateway")

#: Walks an answer's body: (frame, body offset, version) -> what it counts.
_Walk = Callable[[bytes, int, int], Totals]


def write_records(root: Path, records: list[ConnectionRecord], name: str) -> Path:
    """Land ``records`` as one Parquet file, atomically. Blocking: a worker thread's."""
    when = datetime.fromtimestamp(records[0].interval_end_ms / 1000, tz=UTC)
    directory = root / partition(when)
    make_dirs(directory)
    final = directory / f"{name}.parquet"
    staging = directory / f".{name}.parquet.tmp"
    pq.write_table(records_to_arrow(records), staging)
    fd = os.open(staging, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(staging, final)
    fsync_dir(directory)
    return final


class ConnectionLog:
    """One gateway process's connection records: observed on the loop, written off it."""

    def __init__(
        self,
        data_dir: Path,
        *,
        node_id: int,
        interval_ms: int,
        max_keys: int,
        instance_of: Callable[[int], uuid.UUID | None],
        connections: Mapping[int, ConnectionState],
        land: bool = True,
        topic: ConnectionTopic | None = None,
    ) -> None:
        """``land``: write the landing zone's files; ``topic``: produce there too."""
        self._root = landed_connections(data_dir) if land else None
        self._topic = topic
        self._node_id = node_id
        self._interval_s = interval_ms / 1000
        self._instance_of = instance_of
        self._connections = connections
        self._opened: dict[int, int] = {}
        #: connection id -> its ``Usage`` (as a list) since it was last observed.
        self._usage: dict[int, list[int]] = {}
        self.table = ConnectionTable(max_keys, node_id, now_ms())
        self.records_written = 0
        self.write_failures = 0

    def opened(self, conn: ConnectionState) -> None:
        self._opened[conn.connection_id] = now_ms()

    def closed(self, conn: ConnectionState) -> None:
        since = self._opened.pop(conn.connection_id, None)
        self.table.observe(self._key(conn), now_ms(), since_ms=since, usage=self._taken(conn))

    def sent(self, conn: ConnectionState, request: Request) -> Callable[[bytes], None] | None:
        """Proxy mode: a request going upstream. A Produce request's batches count once
        the broker acknowledged their partition (a refused batch sent again counts
        once; acks=0: as sent, nothing answers); a Fetch or ShareFetch response's
        batches count as relayed. Each is walked off its headers."""
        header = request.header
        if header.api_key in COUNTED:
            return functools.partial(
                self._answered, conn, header, 3, functools.partial(consumed_by, header.api_key)
            )
        if header.api_key != ApiKey.PRODUCE:
            return None
        try:
            parts = produced_parts(request.frame, request.offset, header.api_version)
        except ProtocolError:
            return None  # the broker judges it; nothing is counted
        if request.id == NO_RESPONSE:
            self._count(conn, 0, total(parts))
            return None
        return functools.partial(
            self._answered, conn, header, 0, functools.partial(acknowledged, sent=parts)
        )

    def _answered(
        self, conn: ConnectionState, header: RequestHeader, at: int, walk: _Walk, frame: bytes
    ) -> None:
        """Count at ``at`` what ``walk`` finds in the answer ``frame`` to ``header``'s request."""
        try:
            _, offset = parse_response_header(
                frame, response_header_version(header.api_key, header.api_version)
            )
            got = walk(frame, offset, header.api_version)
        except ProtocolError:
            return  # the client judges it; nothing is counted
        self._count(conn, at, got)

    def _count(self, conn: ConnectionState, at: int, got: Totals) -> None:
        if not got[2] or conn.connection_id not in self._opened:
            return  # nothing, or an answer that came after its connection was counted
        counts = self._usage.setdefault(conn.connection_id, [0] * len(NO_USAGE))
        for i, value in enumerate(got, at):
            counts[i] += value

    def _taken(self, conn: ConnectionState) -> Usage:
        counts = self._usage.pop(conn.connection_id, None)
        return NO_USAGE if counts is None else (*counts,)  # type: ignore[return-value]

    def _key(self, conn: ConnectionState) -> ClientKey:
        name, version = conn.software
        asked = self._instance_of(conn.connection_id)
        instance = asked or conn.header_instance_id
        return ClientKey(
            conn.principal,
            conn.client_id or "",
            name,
            version,
            conn.listener,
            conn.security_protocol,
            conn.peer_host,
            instance_text(instance),
            asked is not None,
        )

    async def run(self) -> None:
        """Every interval: count the open connections, drain, land off the loop."""
        while True:
            await asyncio.sleep(self._interval_s)
            await self.flush()

    async def flush(self) -> None:
        """Land what the table holds now (the open connections counted first)."""
        now = now_ms()
        for conn in list(self._connections.values()):
            since = self._opened.get(conn.connection_id)
            self.table.observe(self._key(conn), now, since_ms=since, usage=self._taken(conn))
        records = self.table.drain(now)
        if not records:
            return
        if self._topic is not None:
            await asyncio.to_thread(self._topic.send, records)
        if self._root is None:
            return
        name = f"part-{now}-{self._node_id}-{os.getpid()}"
        try:
            await asyncio.to_thread(write_records, self._root, records, name)
        except OSError as exc:  # a full disk loses this interval's records, loudly
            self.write_failures += 1
            log.warning("connection_records_not_written", records=len(records), error=str(exc))
            return
        self.records_written += len(records)

    def counters(self) -> dict[str, float]:
        topic = self._topic
        return {
            "connection_records_written": float(self.records_written),
            "connection_records_produced": float(topic.produced if topic else 0),
            "connection_records_produce_failures": float(topic.failed if topic else 0),
            "connection_records_dropped": float(self.table.dropped),
            "connection_records_write_failures": float(self.write_failures),
            "connection_records_keys": float(len(self.table)),
        }


def connection_log(
    config: GatewayConfig, manager: ClientMetricsManager, connections: Mapping[int, ConnectionState]
) -> ConnectionLog | None:
    """The configured connection log of a gateway process; None when it is off."""
    if config.connection_records_interval_ms == 0:
        return None
    specs = {spec.name: spec.options for spec in config.exporters}
    topic = connection_topic(specs.get("topic"))
    return ConnectionLog(
        config.data_dir,
        node_id=config.node_id,
        interval_ms=config.connection_records_interval_ms,
        max_keys=config.connection_records_max_keys,
        instance_of=manager.instance_of,
        connections=connections,
        # Landed unless the deployment moved to a topic without the landing zone.
        land="landing" in specs or topic is None,
        topic=topic,
    )

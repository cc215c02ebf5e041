"""The same raw requests to Apache Kafka 4.4 and to the gateway, answers side by side.

A ``Client`` is one connection to each of the two servers (Kafka ties a client
instance to the connection that created it, so a sequence stays on one). ``ask``
sends one request to both and returns both answers; the tests project each answer
onto the fields they compare and say, where the two differ on purpose, which row
of docs/kafka-differences.md allows it.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clientmetrics.wire import (
    RequestHeader,
    decode_response,
    encode_request,
    request_header_version,
    request_type,
)
from clientmetrics.wire.build import build
from tests.frames import recv_frame
from tests.procs import MIN_DEADLINE_S

DIFFERENCES_DOC = Path(__file__).parents[2] / "docs" / "kafka-differences.md"
SERVERS = ("kafka", "gateway")
#: "Whatever both answered" for ``Answers.same``.
ANY: Any = object()


def documented_differences() -> set[str]:
    """The ids (first column, in backquotes) of the one table of deliberate differences."""
    text = DIFFERENCES_DOC.read_text()
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", text, flags=re.M))


class Connection:
    """One Kafka-protocol connection: requests built from plain values, answers decoded."""

    def __init__(self, port: int, client_id: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=MIN_DEADLINE_S)
        self.client_id = client_id
        self.correlation = 0

    def call(self, api_key: int, version: int, values: Mapping[str, Any]) -> Any:
        self.correlation += 1
        header = RequestHeader(
            api_key,
            version,
            self.correlation,
            self.client_id,
            header_version=request_header_version(api_key, version),
        )
        self.sock.sendall(encode_request(header, build(request_type(api_key, version), values)))
        correlation, body = decode_response(api_key, version, recv_frame(self.sock))
        assert correlation == self.correlation
        return body

    def close(self) -> None:
        self.sock.close()


@dataclass(frozen=True)
class Answers:
    """What Kafka and the gateway answered to the same request."""

    kafka: Any
    gateway: Any

    def map(self, projection: Callable[[Any], Any]) -> Answers:
        return Answers(projection(self.kafka), projection(self.gateway))

    def same(self, expected: Any = ANY, what: str = "") -> Any:
        """Both answered alike (and, when given, as ``expected``): the answer."""
        assert self.kafka == self.gateway, f"{what}: kafka {self.kafka!r}, gateway {self.gateway!r}"
        if expected is not ANY:
            assert self.kafka == expected, what
        return self.kafka

    def differ(self, row: str, kafka: Any, gateway: Any, what: str = "") -> None:
        """A deliberate difference: each side as pinned, and the row is in the table."""
        assert row in documented_differences(), f"{row} is not a row of {DIFFERENCES_DOC.name}"
        actual = (self.kafka, self.gateway)
        assert actual == (kafka, gateway), f"{what}: kafka {self.kafka!r}, gateway {self.gateway!r}"


class Client:
    """A client talking to both servers over one connection each."""

    def __init__(self, ports: Mapping[str, int], client_id: str) -> None:
        self.conns = {name: Connection(ports[name], client_id) for name in SERVERS}

    def ask(self, api_key: int, version: int, values: Mapping[str, Any]) -> Answers:
        return self.ask_each(api_key, version, dict.fromkeys(SERVERS, values))

    def ask_each(
        self, api_key: int, version: int, values: Mapping[str, Mapping[str, Any]]
    ) -> Answers:
        """The same request with per-server values (an id each server made, say)."""
        out = {name: self.conns[name].call(api_key, version, values[name]) for name in SERVERS}
        return Answers(out["kafka"], out["gateway"])

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


def fields_of(entity: Any) -> Any:
    """A decoded entity as nested plain values (dicts, tuples, ints), for comparing."""
    if dataclasses.is_dataclass(entity) and not isinstance(entity, type):
        return {f.name: fields_of(getattr(entity, f.name)) for f in dataclasses.fields(entity)}
    if isinstance(entity, tuple):
        return tuple(fields_of(item) for item in entity)
    if hasattr(entity, "total_seconds"):
        return int(entity.total_seconds() * 1000)
    if isinstance(entity, enum.Enum):
        return int(entity.value)  # kio's ErrorCode
    return entity


def wait_until(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Kafka applies config changes through its metadata log: poll until visible."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)

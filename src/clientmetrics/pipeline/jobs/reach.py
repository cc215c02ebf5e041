"""Before Spark starts: the master and the Kafka source answer, or one line, in bounded time.

Spark reports neither on its own in a way an operator can use: its Kafka
consumer retries an unreachable cluster for ever (a warning a second), and a
``spark://`` address that is not a Spark master ends, after about two minutes
of retries, in pages of Java and Python traces. So the command asks both
first, each within ``CONNECT_TIMEOUT_S`` (the gateway's budget for its
upstream), and says what is wrong in one line (``Unreachable``).

* The master: its URL must be one Spark takes; a ``spark://`` master must
  answer Spark's own RPC framing (a request to an endpoint no master has,
  which a master refuses with an ``RpcFailure`` naming the request: nothing
  is logged on the master but the connection's end).
* The Kafka source: the project's own Kafka client connects as Spark's
  consumer would (TLS and SASL from ``--command-config``) and asks for the
  topic's metadata: an unreachable cluster, a TLS or SASL mismatch, refused
  credentials, a missing topic and a topic the principal may not describe
  each get their line. Settings this client does not speak (a JKS trust store,
  GSSAPI) leave the check at "some bootstrap server accepts TCP".

The same metadata says how many partitions the topic has: the Kafka source's
shares (``topic_partitions``).
"""

from __future__ import annotations

import asyncio
import re
import secrets
import socket
import struct
import time
import typing
from collections.abc import Mapping
from typing import Any

from clientmetrics.admin.connection import BrokerConnection
from clientmetrics.admin.errors import (
    AdminAuthenticationError,
    AdminConnectionError,
    AdminError,
    AdminTimeoutError,
)
from clientmetrics.admin.properties import AdminConfig
from clientmetrics.client.properties import CONNECT_TIMEOUT_S, parse_bootstrap
from clientmetrics.errors import ClientMetricsError, ConfigurationError
from clientmetrics.wire import ApiKey, ErrorCode, request_type

__all__ = ["CONNECT_TIMEOUT_S", "Unreachable", "check_kafka", "check_master", "topic_partitions"]


class Unreachable(ClientMetricsError):
    """The master or the Kafka source cannot be used; ``str()`` is the one line to print."""


#: The masters Spark's SparkContext takes (createTaskScheduler), by their shape.
_MASTERS = re.compile(
    r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|spark://.+|yarn|k8s://.+"
)
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^:\[\]]+):(?P<port>\d{1,5})")

# Spark's network protocol (org.apache.spark.network.protocol): an 8-byte frame length
# that counts itself, a message type, then the message. RpcRequest is type 3 (request
# id, body length, body); a server answers RpcResponse (4) or RpcFailure (5) with the
# same request id.
_RPC_REQUEST, _RPC_RESPONSE, _RPC_FAILURE = 3, 4, 5
_PROBE_ENDPOINT = "clientmetrics-probe"
_BACKSTOP_S = 1.0


def check_master(master: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """``Unreachable`` unless ``master`` is a master URL Spark takes and, for ``spark://``,
    some address of it answers as a Spark master within ``timeout_s`` (shared by all)."""
    if not _MASTERS.fullmatch(master):
        raise Unreachable(
            f"bad Spark master {master!r}: expected local, local[N], local[*], "
            "spark://HOST:PORT[,HOST:PORT...], yarn or k8s://URL"
        )
    if not master.startswith("spark://"):
        return
    addresses = master.removeprefix("spark://").split(",")
    for address in addresses:
        if _HOST_PORT.fullmatch(address) is None or not 0 < int(address.rpartition(":")[2]) < 65536:
            raise Unreachable(f"bad Spark master {master!r}: {address!r} is not HOST:PORT")
    deadline = time.monotonic() + timeout_s
    reasons = []
    for index, address in enumerate(addresses):
        budget = max(deadline - time.monotonic(), 0.001) / (len(addresses) - index)
        reason = _spark_answers(address, budget)
        if reason is None:
            return
        reasons.append(f"{address}: {reason}")
    raise Unreachable(f"cannot use the Spark master {master} ({'; '.join(reasons)})")


def _spark_answers(address: str, timeout_s: float) -> str | None:
    """None if a Spark RPC server answers at ``address``, else why not."""
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout_s) as sock:
            request_id = secrets.randbits(63)
            sock.sendall(_rpc_request(request_id, host.strip("[]"), int(port)))
            answer = b""
            while len(answer) < 17:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
    except socket.gaierror as exc:
        return exc.strerror or str(exc)
    except TimeoutError:
        return f"no answer within {timeout_s:.3g} s"
    except OSError as exc:
        return exc.strerror or str(exc)
    kind = answer[8] if len(answer) > 8 else None
    if kind in (_RPC_RESPONSE, _RPC_FAILURE) and answer[9:17] == struct.pack(">q", request_id):
        return None
    return "not a Spark master (it does not answer Spark's RPC)"


def _rpc_request(request_id: int, host: str, port: int) -> bytes:
    """An RpcRequest for an endpoint no master has, as NettyRpcEnv frames its messages:
    the sender (none), the receiver's address and name, then the Java-serialised content
    (a string)."""

    def utf(text: str) -> bytes:
        data = text.encode()
        return struct.pack(">H", len(data)) + data

    content = b"\xac\xed\x00\x05t" + utf("probe")  # ObjectOutputStream: a String
    body = b"\x00\x01" + utf(host) + struct.pack(">i", port) + utf(_PROBE_ENDPOINT) + content
    message = struct.pack(">bqi", _RPC_REQUEST, request_id, len(body)) + body
    return struct.pack(">q", 8 + len(message)) + message


def check_kafka(
    bootstrap: str,
    topic: str,
    properties: Mapping[str, str],
    timeout_s: float = CONNECT_TIMEOUT_S,
) -> None:
    """``Unreachable`` unless a bootstrap server answers, as the consumer would log in,
    and names ``topic`` in its metadata, all within ``timeout_s``."""
    try:
        topic_partitions(bootstrap, topic, properties, timeout_s)
    except ConfigurationError:
        # Settings only Java speaks: the consumer will judge them; here, reachability.
        _check_tcp(bootstrap, timeout_s)


def topic_partitions(
    bootstrap: str,
    topic: str,
    properties: Mapping[str, str],
    timeout_s: float = CONNECT_TIMEOUT_S,
) -> int:
    """How many partitions ``topic`` has, asked as the consumer would log in.

    ``Unreachable`` as ``check_kafka`` says; ``ConfigurationError`` for settings
    this client does not speak (a JKS trust store, GSSAPI).
    """
    config = AdminConfig.from_properties(
        bootstrap, {**properties, "client.id": "clientmetrics-pipeline"}, timeout_s
    )
    try:
        # The connection has timeout_s, shared by the bootstrap servers; this backstop
        # bounds the whole check (a slow connect, then the metadata request) close to it.
        return asyncio.run(asyncio.wait_for(_check_topic(config, topic), timeout_s + _BACKSTOP_S))
    except TimeoutError:
        raise Unreachable(
            f"cannot reach the Kafka cluster at {bootstrap}: no answer within "
            f"{timeout_s + _BACKSTOP_S:g} s"
        ) from None
    except (AdminConnectionError, AdminTimeoutError) as exc:
        raise Unreachable(f"cannot reach the Kafka cluster at {bootstrap}: {exc}") from exc
    except AdminAuthenticationError as exc:
        raise Unreachable(f"cannot log in to the Kafka cluster at {bootstrap}: {exc}") from exc
    except AdminError as exc:
        raise Unreachable(f"cannot read topic {topic} from {bootstrap}: {exc}") from exc


async def _check_topic(config: AdminConfig, topic: str) -> int:
    conn = await BrokerConnection.connect(config)
    try:
        response = await conn.request(ApiKey.METADATA, lambda v: _metadata_request(v, topic))
    finally:
        await conn.close()
    for found in response.topics:
        code = ErrorCode.for_code(int(found.error_code))
        if code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise AdminError(
                code, f"topic {topic} does not exist (check --topic; the exporter creates it)"
            )
        if code is not ErrorCode.NONE:
            raise AdminError(code)
        return len(found.partitions)
    raise AdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no metadata for topic {topic}")


def _metadata_request(version: int, topic: str) -> Any:
    """Metadata for ``topic`` alone, never creating it, at ``version``."""
    entity = request_type(ApiKey.METADATA, version)
    hints = typing.get_type_hints(entity)
    topic_type = typing.get_args(typing.get_args(hints["topics"])[0])[0]
    named = topic_type(name=topic, **({"topic_id": None} if version >= 10 else {}))
    flags = (
        "allow_auto_topic_creation",
        "include_cluster_authorized_operations",
        "include_topic_authorized_operations",
    )
    return entity(topics=(named,), **{flag: False for flag in flags if flag in hints})


def _check_tcp(bootstrap: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    servers = parse_bootstrap(bootstrap)
    reasons = []
    for index, (host, port) in enumerate(servers):
        budget = max(deadline - time.monotonic(), 0.001) / (len(servers) - index)
        try:
            socket.create_connection((host, port), budget).close()
            return
        except TimeoutError:
            reasons.append(f"{host}:{port} (no answer within {budget:.3g} s)")
        except OSError as exc:
            reasons.append(f"{host}:{port} ({exc.strerror or exc})")
    raise Unreachable(f"cannot reach the Kafka cluster at {bootstrap}: {'; '.join(reasons)}")

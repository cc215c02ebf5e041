"""Differential conformance: the same raw requests to Apache Kafka 4.4.0 and to the gateway.

Kafka runs with the launcher's recording test plugin (so it advertises 71/72 and writes
down what it hands a plugin); the gateway runs standalone. Every answer is compared
field by field. Only what must differ is left out: ids each server makes up itself
(a Get with a zero id gets a random one on each side; the SubscriptionId of such an
instance follows from it). Every other difference is a row of
docs/kafka-differences.md, named where it is asserted, with both sides pinned.

A "null" ClientInstanceId cannot be sent: Kafka's ``uuid`` type is not nullable, so a
client's null is the zero id on the wire.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
import socket
import struct
import time
import uuid
from pathlib import Path
from typing import Any

import crc32c
import pytest
from peers.kafka import KafkaBroker

from clientmetrics.telemetry.compression import compress, compress_snappy_xerial
from clientmetrics.telemetry.subscription_id import uuid_hash_code
from tests.conformance.config_cases import ALTER_CASES, SET
from tests.conformance.pair import Answers, Client, fields_of, wait_until
from tests.frames import recv_frame
from tests.landed import rows_of
from tests.procs import MIN_DEADLINE_S, GatewayProcess, wait_for
from tests.synthetic import producer_payload

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

INTERVAL = 500
PRODUCER, CONSUMER = "org.apache.kafka.producer.", "org.apache.kafka.consumer."
#: An instance id whose Java hashCode is 0 (msb ^ lsb = 0x8888888888888888).
K1 = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
ONE = uuid.UUID(int=1)
ZERO = uuid.UUID(int=0)
#: Matched by its canonical text in the gateway only (Kafka matches the base64 form).
K7 = uuid.UUID("7c1d6a7e-2f3b-4c5d-9e8f-0a1b2c3d4e5f")
PAYLOAD = producer_payload(1_700_000_000_000_000_000, 1)


def alter(name: str, ops: Any, validate_only: bool = False, resource_type: int = 16) -> Any:
    configs = [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]
    resource = {"resource_type": resource_type, "resource_name": name, "configs": configs}
    return {"resources": [resource], "validate_only": validate_only}


def describe(*names: str, keys: list[str] | None = None, resource_type: int = 16) -> Any:
    resources = [
        {"resource_type": resource_type, "resource_name": n, "configuration_keys": keys}
        for n in names
    ]
    return {"resources": resources, "include_synonyms": True, "include_documentation": True}


def outcome(response: Any) -> tuple[int, str | None]:
    (result,) = response.responses
    return int(result.error_code), result.error_message


def raw_api_versions(port: int, version: int) -> tuple[int, list[tuple[int, int, int]]]:
    """An ApiVersions of a version nobody serves: (error code, the api list)."""
    body = struct.pack(">hhih", 18, version, 7, 1) + b"x" + b"\x00"
    with socket.create_connection(("127.0.0.1", port), timeout=MIN_DEADLINE_S) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        frame = recv_frame(sock)
    (code, count) = struct.unpack_from(">hi", frame, 4)
    return code, [struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)]


def test_api_versions_as_kafka(ports: dict[str, int]) -> None:
    client = Client(ports, "conformance")
    v3 = client.ask(18, 3, {"client_software_name": "conformance", "client_software_version": "1"})
    v3.map(lambda r: (int(r.error_code), int(r.throttle_time.total_seconds()))).same((0, 0))
    ranges = v3.map(lambda r: {k.api_key: (k.min_version, k.max_version) for k in r.api_keys})
    for key in (32, 33, 44, 74):  # the config RPCs and ListConfigResources
        Answers(ranges.kafka[key], ranges.gateway[key]).same()
    assert ranges.kafka[74] == (0, 1)
    assert ranges.kafka[32] == (1, 4)
    pick = ranges.map(lambda r: (r[18], r[71], r[72]))
    Answers(pick.kafka[1:], pick.gateway[1:]).differ(
        "kip1313", kafka=((0, 0), (0, 0)), gateway=((0, 1), (0, 1))
    )
    Answers(pick.kafka[0], pick.gateway[0]).differ("apiversions-v5", kafka=(0, 5), gateway=(0, 4))
    assert set(ranges.gateway) < set(ranges.kafka)
    # Metadata, SaslHandshake, ApiVersions, DescribeConfigs, AlterConfigs, SaslAuthenticate,
    # IncrementalAlterConfigs, the SCRAM credential RPCs, 71, 72, 74 (SASL on every
    # listener once one listener has it, as Kafka does).
    served = [3, 17, 18, 32, 33, 36, 44, 50, 51, 71, 72, 74]
    Answers(len(ranges.kafka) > 70, sorted(ranges.gateway)).differ(
        "standalone-apis", kafka=True, gateway=served
    )
    v4 = client.ask(18, 4, {"client_software_name": "c", "client_software_version": "1"})
    v4.map(lambda r: (bool(r.supported_features), r.finalized_features_epoch > 0)).differ(
        "features", kafka=(True, True), gateway=(False, False)
    )
    bad = client.ask(18, 3, {"client_software_name": "bad name!", "client_software_version": "1"})
    bad.map(lambda r: (int(r.error_code), r.api_keys)).same((42, ()))
    client.ask(18, 0, {}).map(lambda r: (int(r.error_code), bool(r.api_keys))).same((0, True))
    unknown = Answers(raw_api_versions(ports["kafka"], 99), raw_api_versions(ports["gateway"], 99))
    unknown.differ(
        "apiversions-v5", kafka=(35, [(18, 0, 5)]), gateway=(35, [(18, 0, 4)]), what="v99"
    )
    client.close()


def test_config_rpcs_as_kafka(ports: dict[str, int]) -> None:
    admin = Client(ports, "conformance-admin")
    for case in ALTER_CASES:
        request = alter(case.name, case.ops, validate_only=True, resource_type=case.resource_type)
        response = admin.ask(44, 1, request)
        answers = response.map(outcome)
        if case.row:
            answers.differ(case.row, kafka=case.kafka, gateway=case.gateway, what=case.label)
        else:
            answers.same(case.both, what=case.label)
            response.map(fields_of).same(what=case.label)  # every other field too

    # What is stored, as describe shows it (every field of every version).
    stored = [
        ("metrics", SET, " a , b,a "),
        ("interval.ms", SET, " +200 "),
        ("match", SET, "client_id = x , client_id = x"),
    ]
    admin.ask(44, 1, alter("conf-stored", stored)).map(outcome).same((0, None))
    legacy = {"resources": [{"resource_type": 16, "resource_name": "conf-legacy", "configs": [
        {"name": "metrics", "value": "a,a,b"}, {"name": "interval.ms", "value": "500"}]}],
        "validate_only": False}  # fmt: skip
    admin.ask(33, 2, legacy).map(outcome).same((0, None))
    values = {"interval.ms": "200", "match": "client_id = x", "metrics": "a,b"}

    def described(version: int = 4, *names: str) -> Answers:
        return admin.ask(32, version, describe(*(names or ("conf-stored",)))).map(fields_of)

    wait_until(
        lambda: (
            {c["name"]: c["value"] for c in described().kafka["results"][0]["configs"]} == values
        ),
        "Kafka to apply conf-stored",
    )
    for version in (1, 2, 3, 4):
        answer = described(version, "conf-stored", "conf-legacy", "never-made", "")
        answer.same(what=f"DescribeConfigs v{version}")
    result = described().kafka["results"][0]
    assert result["error_message"] == ""
    assert [(c["name"], c["value"], c["config_source"]) for c in result["configs"]] == [
        (k, v, 7) for k, v in values.items()
    ]
    admin.ask(32, 4, describe("conf-stored", keys=["metrics", "bogus"])).map(fields_of).same()
    topic = admin.ask(32, 4, describe("t", resource_type=2)).map(
        lambda r: (int(r.results[0].error_code), r.results[0].error_message)
    )
    topic.differ(
        "standalone-resources",
        kafka=(3, ""),
        gateway=(
            42,
            "Resource type TOPIC is not served by this gateway in standalone mode; "
            "only CLIENT_METRICS (16) resources are.",
        ),
    )

    def listed(version: int, types: tuple[int, ...] = ()) -> Answers:
        values = {"resource_types": list(types)} if version else {}
        return admin.ask(74, version, values).map(fields_of)

    for version, types in ((0, ()), (1, (16,)), (1, (16, 2)), (1, (2,)), (1, (32,)), (1, (99,))):
        listed(version, types).same(what=f"ListConfigResources v{version} {types}")
    # Kafka lists them in its map's order (not sorted): the gateway too, so tools print alike.
    names = ({"resource_name": "conf-stored"}, {"resource_name": "conf-legacy"})
    assert [r for r in listed(0).kafka["config_resources"] if r in names] == list(names)
    assert listed(1, (99,)).kafka["error_code"] == 35
    every = listed(1).map(lambda r: sorted((c["resource_name"], c["resource_type"])
                                           for c in r["config_resources"]))  # fmt: skip
    theirs = every.kafka
    every.differ(
        "standalone-resources",
        kafka=theirs,
        gateway=[c for c in theirs if c[1] == 16],
    )
    assert {("1", 4), ("1", 8), ("conf-legacy", 16), ("conf-stored", 16)} <= set(theirs)
    admin.ask(33, 2, {"resources": [{"resource_type": 16, "resource_name": "conf-legacy",
                                     "configs": []}], "validate_only": False})  # fmt: skip
    wait_until(
        lambda: {"resource_name": "conf-legacy"} not in listed(0).kafka["config_resources"],
        "Kafka to delete conf-legacy",
    )
    listed(0).same()
    admin.close()


SUBSCRIPTIONS = {
    "conf-tel": [
        ("metrics", SET, f"{PRODUCER},{CONSUMER}"),
        ("interval.ms", SET, str(INTERVAL)),
        ("match", SET, "client_id=tel-.*"),
    ],
    "conf-all": [
        ("metrics", SET, "*"),
        ("interval.ms", SET, "600000"),
        ("match", SET, "client_id=all-.*"),
    ],
    "conf-iid": [("metrics", SET, "x."), ("match", SET, f"client_instance_id={K7}")],
}


def get(client: Client, iid: uuid.UUID | Answers) -> Answers:
    """GetTelemetrySubscriptions with ``iid`` (or each server's own id)."""
    ids = iid if isinstance(iid, Answers) else Answers(iid, iid)
    values = {"kafka": {"client_instance_id": ids.kafka},
              "gateway": {"client_instance_id": ids.gateway}}  # fmt: skip
    return client.ask_each(71, 0, values).map(fields_of)


class Pusher:
    """PushTelemetry to both; remembers what each server should hand on (payload
    decompressed) when it accepts a push."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.handed: dict[str, list[tuple[bytes, bool]]] = {"kafka": [], "gateway": []}

    def __call__(
        self,
        iid: uuid.UUID,
        sid: int | Answers,
        payload: bytes = PAYLOAD,
        compression: int = 0,
        *,
        terminating: bool = False,
        data: bytes | None = None,
        wait: bool = True,
    ) -> Answers:
        sids = sid if isinstance(sid, Answers) else Answers(sid, sid)
        common = {"client_instance_id": iid, "terminating": terminating,
                  "compression_type": compression, "metrics": payload}  # fmt: skip
        values = {"kafka": {**common, "subscription_id": sids.kafka},
                  "gateway": {**common, "subscription_id": sids.gateway}}  # fmt: skip
        answers = self.client.ask_each(72, 0, values)
        answers.map(lambda r: r.throttle_time.total_seconds()).same(0, "ThrottleTimeMs")
        codes = answers.map(lambda r: int(r.error_code))
        for server, code in (("kafka", codes.kafka), ("gateway", codes.gateway)):
            if code == 0:
                self.handed[server].append((payload if data is None else data, terminating))
        if wait:
            time.sleep(INTERVAL * 1.1 / 1000)  # the next push is due
        return codes

    def null_metrics(self, iid: uuid.UUID, sid: int) -> Answers:
        """A push whose Metrics is null (compact length 0), as older librdkafka sends when
        nothing matched: the error code, or "closed" if the server hung up."""
        body = iid.bytes + struct.pack(">ib", sid, 0) + b"\x00" + b"\x00" + b"\x00"
        out = {}
        for server, conn in self.client.conns.items():
            conn.correlation += 1
            header = struct.pack(">hhih", 72, 0, conn.correlation, 3) + b"tel" + b"\x00"
            conn.sock.sendall(struct.pack(">i", len(header + body)) + header + body)
            try:
                out[server] = struct.unpack_from(">h", recv_frame(conn.sock), 9)[0]
            except (ConnectionError, TimeoutError):
                out[server] = "closed"
        time.sleep(INTERVAL * 1.1 / 1000)
        return Answers(out["kafka"], out["gateway"])


def test_telemetry_as_kafka(
    ports: dict[str, int], kafka: KafkaBroker, gateway: GatewayProcess, plugin_record: Path
) -> None:
    admin = Client(ports, "conformance-admin")
    for name, ops in SUBSCRIPTIONS.items():
        admin.ask(44, 1, alter(name, ops)).map(outcome).same((0, None))
    probe = Client(ports, "all-probe")
    wait_until(
        lambda: get(probe, uuid.uuid4()).kafka["requested_metrics"] == ("*",),
        "Kafka to apply the subscriptions",
    )

    # A Get with a zero id: a new id on each side, nothing else differs.
    other = Client(ports, "other")
    fresh = get(other, ZERO)
    assert ZERO not in (fresh.kafka["client_instance_id"], fresh.gateway["client_instance_id"])
    fresh.map(lambda r: {**r, "client_instance_id": 0, "subscription_id": 0}).same(
        {"throttle_time": 0, "error_code": 0, "client_instance_id": 0, "subscription_id": 0,
         "accepted_compression_types": (4, 3, 1, 2), "push_interval": 300000,
         "telemetry_max_bytes": 1048576, "delta_temporality": True, "requested_metrics": ()}
    )  # fmt: skip

    # A known id: the same answer from both, SubscriptionId included (Kafka's formula).
    tel = Client(ports, "tel-1")
    push = Pusher(tel)
    sid = crc32c.crc32c(f"[{PRODUCER}, {CONSUMER}]{INTERVAL}".encode())
    sid -= 1 << 32 if sid >= 1 << 31 else 0  # hashCode(K1) is 0: the id is the CRC
    first = get(tel, K1).same()
    assert (first["subscription_id"], first["requested_metrics"]) == (sid, (PRODUCER, CONSUMER))
    assert first["push_interval"] == INTERVAL
    throttled = {
        "throttle_time": 0,
        "error_code": 89,
        "client_instance_id": ZERO,
        "subscription_id": 0,
        "accepted_compression_types": (),
        "push_interval": 0,
        "telemetry_max_bytes": 0,
        "delta_temporality": False,
        "requested_metrics": (),
    }
    get(tel, K1).same(throttled, "an early Get")
    push(K1, 12345, wait=False).same(117, "a wrong SubscriptionId")
    get(tel, K1).same(first, "the re-fetch right after 117")
    push(K1, sid).same(89, "a push right after the re-fetch")
    for compression, payload in ((0, PAYLOAD), (1, compress(1, PAYLOAD)),
                                 (2, compress_snappy_xerial(PAYLOAD)), (2, compress(2, PAYLOAD)),
                                 (3, compress(3, PAYLOAD)), (4, compress(4, PAYLOAD))):  # fmt: skip
        push(K1, sid, payload, compression, data=PAYLOAD).same(0, f"compression {compression}")
    push(K1, sid, PAYLOAD, 5, wait=False).same(76, "compression 5")
    get(tel, K1).same(first, "the re-fetch right after 76")
    time.sleep(INTERVAL / 1000)
    push(K1, sid, PAYLOAD, -1).same(76, "compression -1")
    push(K1, sid, b"").same(0, "an empty push")
    push(K1, sid, b"\x1f\x8b\x08\x00garbage", 1).same(87, "a corrupt gzip stream")
    push(K1, sid, bytes(1048577)).same(118, "a payload over telemetry.max.bytes")
    bomb = gzip.compress(bytes(3 * 1048576))
    push(K1, sid, bomb, 1).differ("decompressed-size", kafka=87, gateway=118)
    garbage = b"\xff\xfe not protobuf"
    push(K1, sid, garbage, wait=False).differ("not-otlp", kafka=0, gateway=87)
    time.sleep(INTERVAL * 0.65 / 1000)  # 0.65 of an interval after the last push
    push(K1, sid).differ("early-push", kafka=89, gateway=0)
    push(K1, sid, terminating=True, wait=False).same(0, "a terminating push")
    push(K1, sid).same(42, "a push after the terminating one")
    push(K1, sid).differ("terminating", kafka=0, gateway=42, what="and the next")

    # A failed terminating push.
    tel2 = Client(ports, "tel-2")
    push2 = Pusher(tel2)
    k2 = uuid.UUID(int=random.getrandbits(128))
    sid2 = get(tel2, k2).same()["subscription_id"]
    push2(k2, 999, terminating=True).same(117, "a terminating push with a wrong id")
    push2(k2, sid2).differ("terminating", kafka=42, gateway=0, what="after a failed goodbye")

    # A null Metrics field (on its own connection: Kafka hangs up).
    nulls = Client(ports, "tel-3")
    k6 = uuid.UUID(int=random.getrandbits(128))
    sid6 = get(nulls, k6).same()["subscription_id"]
    Pusher(nulls).null_metrics(k6, sid6).differ("null-metrics", kafka="closed", gateway=0)

    # Reserved ids, and a push before any Get (each server makes the instance then).
    push2(ZERO, 0, wait=False).same(42, "the zero id")
    push2(ONE, 0, wait=False).same(42, "the reserved id")
    reserved = get(tel2, ONE).map(lambda r: r["client_instance_id"] == ONE)
    reserved.differ("reserved-id-get", kafka=True, gateway=False)
    k3 = uuid.UUID(int=random.getrandbits(128))
    early_sid = sid ^ uuid_hash_code(k3)  # the CRC is the same; the instance hash changes
    push2(k3, early_sid, wait=False).same(0, "a push before any Get")
    push2(k3, early_sid).same(89, "and a second one at once")
    k4 = uuid.UUID(int=random.getrandbits(128))
    push2(k4, 0, wait=False).same(117, "an unknown instance with SubscriptionId 0")
    get(tel2, k4).same(what="a Get after that push")

    # More than 300000 ms.
    everything = Client(ports, "all-1")
    k5 = uuid.UUID(int=random.getrandbits(128))
    wide = get(everything, k5)
    wide.map(lambda r: r["push_interval"]).differ("interval-cap", kafka=300000, gateway=600000)
    wide.map(lambda r: r["requested_metrics"]).differ("all-metrics", kafka=("*",), gateway=("",))
    # Both compute the SubscriptionId from "*" (each with its own interval).
    star = {ms: crc32c.crc32c(f"[*]{ms}".encode()) ^ (uuid_hash_code(k5) & 0xFFFFFFFF)
            for ms in (300000, 600000)}  # fmt: skip
    wide.map(lambda r: r["subscription_id"] & 0xFFFFFFFF).differ(
        "interval-cap", kafka=star[300000], gateway=star[600000]
    )
    by_uuid = get(other, K7).map(lambda r: r["requested_metrics"])
    by_uuid.differ("instance-id-selector", kafka=(), gateway=("x.",))

    # A subscription change: an immediate Get is answered, the old id is refused.
    admin.ask(44, 1, alter("conf-tel", [("interval.ms", SET, "300")])).map(outcome).same((0, None))
    wait_until(
        lambda: (
            Client(ports, "tel-probe")
            .ask(71, 0, {"client_instance_id": uuid.uuid4()})
            .kafka.push_interval.total_seconds()
            == 0.3
        ),
        "Kafka to apply the change",
    )
    changed = get(tel2, k2).same(what="a Get after the change")
    assert changed["push_interval"] == 300
    assert changed["subscription_id"] != sid2
    push2(k2, sid2, wait=False).same(117, "the old SubscriptionId")

    # What Kafka handed its plugin is what the gateway landed (but the empty push).
    def plugin_pushes() -> list[tuple[bytes, bool]]:
        lines = plugin_record.read_text().splitlines() if plugin_record.exists() else []
        rows = [json.loads(line) for line in lines]
        return sorted((base64.b64decode(r["data"]), r["terminating"])
                      for r in rows if r["client_id"] == "tel-1")  # fmt: skip

    def landed() -> list[tuple[bytes, bool]]:
        return sorted((bytes(r["payload"]), bool(r["terminating"]))  # type: ignore[arg-type]
                      for r in rows_of(gateway.data_dir, "tel-1"))  # fmt: skip

    wait_for(lambda: len(landed()) == len(push.handed["gateway"]), 10, what="landing")
    Answers(plugin_pushes(), landed()).differ(
        "empty-push-landed",
        kafka=sorted(p for p in push.handed["kafka"] if p[0]),
        gateway=sorted(push.handed["gateway"]),
    )
    for client in (admin, probe, other, tel, tel2, nulls, everything):
        client.close()

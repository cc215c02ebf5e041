"""Golden frames: bytes as real clients send them, assembled by hand from the spec."""

from __future__ import annotations

import datetime
import uuid

from kio.schema.errors import ErrorCode as KioErrorCode

from clientmetrics.wire import (
    FrameDecoder,
    RequestHeader,
    decode_request,
    decode_response,
    encode_response,
    request_type,
    response_type,
)

# ApiVersions v3, as confluent-kafka-python 2.16.1 (librdkafka 2.16.0) sent it with
# client.id "probe" (checked once against a capture on a loopback socket).
APIVERSIONS_V3 = bytes.fromhex(
    "0000003e"  # frame size 62
    "0012"
    "0003"
    "00000001"  # ApiVersions, v3, correlation id 1
    "0005"
    "70726f6265"  # ClientId "probe": int16 length even in header v2
    "00"  # header tagged fields
    "17"
    + b"confluent-kafka-python".hex()  # compact string: length + 1 = 0x17
    + "16"
    + b"2.16.1-rdkafka-2.16.0".hex()
    + "00"  # body tagged fields
)

# GetTelemetrySubscriptions v0, the first request of a client: zero instance id.
GET_SUBSCRIPTIONS_V0 = bytes.fromhex(
    "00000023"  # frame size 35
    "0047"
    "0000"
    "0000002a"  # key 71, v0, correlation id 42
    "0007"
    + b"rdkafka".hex()
    + "00"  # ClientId, header tags
    + "00" * 16  # ClientInstanceId: zero uuid
    + "00"  # body tags
)


def _frame(framed: bytes) -> bytes:
    (frame,) = FrameDecoder().feed(framed)
    return frame


def test_librdkafka_api_versions_v3() -> None:
    header, body = decode_request(_frame(APIVERSIONS_V3))
    assert header == RequestHeader(18, 3, 1, "probe", None, 2)
    assert body == request_type(18, 3)(
        client_software_name="confluent-kafka-python",
        client_software_version="2.16.1-rdkafka-2.16.0",
    )


def test_first_get_telemetry_subscriptions_carries_the_zero_uuid() -> None:
    header, body = decode_request(_frame(GET_SUBSCRIPTIONS_V0))
    assert header == RequestHeader(71, 0, 42, "rdkafka", None, 2)
    # kio reads a zero uuid as None; the wire layer hands out the zero UUID instead.
    assert body.client_instance_id == uuid.UUID(int=0)


def test_get_telemetry_subscriptions_v0_response_bytes() -> None:
    header = RequestHeader(71, 0, 42, "rdkafka")
    instance_id = uuid.UUID("5a4d0c9e-0e4c-4d5b-9f1e-2f6f3b1c8a77")
    body = response_type(71, 0)(
        throttle_time=datetime.timedelta(0),
        error_code=KioErrorCode.none,
        client_instance_id=instance_id,
        subscription_id=-7,
        accepted_compression_types=(4, 3, 1, 2),
        push_interval=datetime.timedelta(milliseconds=300000),
        telemetry_max_bytes=1048576,
        delta_temporality=True,
        requested_metrics=("org.apache.kafka.producer.",),
    )
    expected = (
        bytes.fromhex("0000002a00")  # correlation id, response header v1 tags
        + bytes.fromhex("000000000000")  # throttle, error
        + instance_id.bytes
        + bytes.fromhex("fffffff9")  # subscription id -7
        + bytes.fromhex("0504030102")  # compact array of 4 int8
        + bytes.fromhex("000493e00010000001")
        + bytes.fromhex("021b")
        + b"org.apache.kafka.producer."
        + b"\x00"
    )
    framed = encode_response(header, body)
    assert framed[4:] == expected
    assert decode_response(71, 0, framed[4:]) == (42, body)

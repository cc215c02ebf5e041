"""The sans-IO server connection: bytes in, results out, bytes back; no sockets."""

from __future__ import annotations

import struct
import uuid

import pytest

from clientmetrics.wire import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_request,
    encode_request_header,
    request_type,
)
from clientmetrics.wire.limits import SMALL_REQUEST_BYTES, RequestBudget
from clientmetrics.wire.server import (
    NO_RESPONSE,
    Close,
    CloseReason,
    Forward,
    Request,
    Respond,
    Serve,
    ServerConnection,
)
from tests.wire.shell import receive

SERVED: dict[int, tuple[int, int]] = {
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 1),
}


def api_versions(correlation_id: int, version: int = 3, client_id: str = "c") -> bytes:
    header = RequestHeader(18, version, correlation_id, client_id, None, 2 if version >= 3 else 1)
    body = (
        request_type(18, version)(client_software_name="t", client_software_version="1")
        if version >= 3
        else request_type(18, version)()
    )
    return encode_request(header, body)


def get_v1(correlation_id: int, instance: uuid.UUID | None) -> bytes:
    header = RequestHeader(71, 1, correlation_id, "c", instance, 3)
    return encode_request(header, request_type(71, 1)())


def raw(header: RequestHeader, body: bytes = b"") -> bytes:
    payload = encode_request_header(header) + body
    return struct.pack(">i", len(payload)) + payload


def frames_of(chunks: list[bytes | bytearray]) -> list[bytes]:
    data = b"".join(chunks)
    out = []
    while data:
        (size,) = struct.unpack_from(">i", data)
        out.append(data[4 : 4 + size])
        data = data[4 + size :]
    return out


def correlation_ids(chunks: list[bytes | bytearray]) -> list[int]:
    return [struct.unpack_from(">i", f)[0] for f in frames_of(chunks)]


def test_pipelined_requests_are_answered_in_request_order() -> None:
    core = ServerConnection(served=SERVED)
    results = receive(core, b"".join(api_versions(c) for c in (7, 8, 9)), 0)
    assert [type(r) for r in results] == [Serve, Serve, Serve]
    requests = [r.request for r in results if isinstance(r, Serve)]
    assert [r.id for r in requests] == [0, 1, 2]
    assert [r.header.correlation_id for r in requests] == [7, 8, 9]
    core.complete(2, b"\x00\x00\x00\x04\x00\x00\x00\x09")
    core.complete(1, b"\x00\x00\x00\x04\x00\x00\x00\x08")
    assert core.data_to_send() == []  # 0 is not answered yet: nothing may overtake it
    assert core.in_flight == 3
    core.complete(0, b"\x00\x00\x00\x04\x00\x00\x00\x07")
    assert correlation_ids(core.data_to_send()) == [7, 8, 9]
    assert core.in_flight == 0
    assert core.data_to_send() == []


def test_bytes_split_anywhere_give_the_same_requests() -> None:
    stream = api_versions(1) + api_versions(2)
    for cut in range(1, len(stream)):
        core = ServerConnection(served=SERVED)
        results = receive(core, stream[:cut], 0) + receive(core, stream[cut:], 0)
        assert [r.request.header.correlation_id for r in results if isinstance(r, Serve)] == [1, 2]


def test_upstream_responses_are_framed_by_the_core() -> None:
    core = ServerConnection(forwarding=True)
    (result,) = receive(core, api_versions(5), 0)
    assert isinstance(result, Forward)
    big = b"\x00\x00\x00\x05" + b"x" * 100_000
    core.complete(result.request.id, big, framed=False)
    chunks = core.data_to_send()
    assert chunks[0] == struct.pack(">i", len(big))
    assert chunks[1] is big  # large upstream responses are not copied


def test_produce_with_acks_0_takes_no_response_slot() -> None:
    header = RequestHeader(0, 8, 3, "p", None, 1)
    # v8: transactional_id (null), acks 0, timeout, no topics.
    body = struct.pack(">hhii", -1, 0, 1000, 0)
    core = ServerConnection(forwarding=True)
    (produce,) = receive(core, raw(header, body), 0)
    (versions,) = receive(core, api_versions(4), 0)
    assert isinstance(produce, Forward)
    assert produce.request.id == NO_RESPONSE
    assert isinstance(versions, Forward)
    assert versions.request.id == 0
    acks_all = struct.pack(">hhii", -1, -1, 1000, 0)
    (answered,) = receive(core, raw(RequestHeader(0, 8, 5, "p", None, 1), acks_all), 0)
    assert isinstance(answered, Forward)
    assert answered.request.id == 1


def test_kip1313_first_v3_request_fixes_the_instance_id() -> None:
    mine, other = uuid.uuid4(), uuid.uuid4()
    core = ServerConnection(served=SERVED)
    assert isinstance(receive(core, get_v1(1, mine), 0)[0], Serve)
    assert core.header_instance_id == mine
    assert isinstance(receive(core, get_v1(2, mine), 0)[0], Serve)
    assert receive(core, get_v1(3, other), 0) == [
        Respond(2, ErrorCode.INVALID_REQUEST, rejected="kip1313_instance_id")
    ]
    # A v2-header request after a v3 one is refused too; SaslHandshake is exempt.
    assert receive(core, api_versions(4), 0) == [
        Respond(3, ErrorCode.INVALID_REQUEST, rejected="kip1313_instance_id")
    ]
    handshake = raw(RequestHeader(17, 1, 5, "c", None, 1), b"\x00\x05PLAIN")
    assert receive(core, handshake, 0) == [Respond(4, ErrorCode.NONE)]
    for request_id in (0, 1):
        core.complete(request_id, None)
    frames = frames_of(core.data_to_send())
    assert int(decode_response(71, 1, frames[0])[1].error_code) == ErrorCode.INVALID_REQUEST
    # ApiVersions answers its error in a v0 header: the code right after the id.
    assert struct.unpack_from(">h", frames[1], 4)[0] == ErrorCode.INVALID_REQUEST
    # The handshake got ILLEGAL_SASL_STATE (no SASL here), not INVALID_REQUEST.
    assert struct.unpack_from(">h", frames[2], 4)[0] == ErrorCode.ILLEGAL_SASL_STATE


def test_kip1313_zero_instance_id_on_the_first_request_is_refused() -> None:
    core = ServerConnection(served=SERVED)
    assert receive(core, get_v1(1, uuid.UUID(int=0)), 0) == [
        Respond(0, ErrorCode.INVALID_REQUEST, rejected="kip1313_instance_id")
    ]
    assert core.client_id == "c"


def test_first_request_fixes_the_client_id() -> None:
    core = ServerConnection(served=SERVED)
    receive(core, api_versions(1, client_id="first"), 0)
    receive(core, api_versions(2, client_id="second"), 0)
    assert core.client_id == "first"


def test_unserved_api_closes_standalone_and_is_forwarded_by_a_proxy() -> None:
    # A key the codec cannot even shape an error for: Kafka closes the connection.
    produce = raw(RequestHeader(0, 8, 1, "c", None, 1), struct.pack(">hhii", -1, 1, 1000, 0))
    standalone = ServerConnection(served=SERVED)
    (result,) = receive(standalone, produce, 0)
    assert result == Close(CloseReason.UNSUPPORTED_API, "unsupported api key 0 version 8")
    assert standalone.closed
    assert receive(standalone, api_versions(2), 0) == []
    # A key the codec knows gets a well-formed UNSUPPORTED_VERSION answer instead.
    metadata = raw(RequestHeader(3, 4, 1, "c", None, 1), struct.pack(">ib", 0, 0))
    other = ServerConnection(served=SERVED)
    assert receive(other, metadata, 0) == [Respond(0, ErrorCode.UNSUPPORTED_VERSION)]
    proxy = ServerConnection(served=SERVED, forwarding=True)
    (forwarded,) = receive(proxy, metadata, 0)
    assert isinstance(forwarded, Forward)
    assert forwarded.request.frame == metadata[4:]


def test_unsupported_version_of_a_served_api_gets_unsupported_version() -> None:
    core = ServerConnection(served={ApiKey.API_VERSIONS: (0, 3)}, advertised={18: (0, 3)})
    (result,) = receive(core, api_versions(9, version=4), 0)
    assert result == Respond(0, ErrorCode.UNSUPPORTED_VERSION)
    (frame,) = frames_of(core.data_to_send())
    # Listing what this listener supports, so the client can retry with a version it has.
    _, body = decode_response(18, 4, frame)
    assert int(body.error_code) == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 3)]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (struct.pack(">i", -5), CloseReason.PROTOCOL_ERROR),
        (struct.pack(">i", 3) + b"abc", CloseReason.PROTOCOL_ERROR),  # shorter than a header
        (struct.pack(">i", 5000), CloseReason.FRAME_TOO_LARGE),
    ],
)
def test_bad_frames_close_the_connection(data: bytes, reason: CloseReason) -> None:
    core = ServerConnection(served=SERVED, max_request_bytes=4096)
    (result,) = receive(core, data, 0)
    assert isinstance(result, Close)
    assert result.reason is reason


def test_handler_failures_follow_one_policy() -> None:
    from clientmetrics.wire import ProtocolError, UnsupportedApi

    core = ServerConnection(served=SERVED)
    results = receive(core, api_versions(1) + api_versions(2) + api_versions(3), 0)
    first, second, third = (r.request for r in results if isinstance(r, Serve))
    assert core.fail(first, RuntimeError("bug")) == Respond(0, ErrorCode.UNKNOWN_SERVER_ERROR)
    assert core.fail(second, UnsupportedApi(18, 3)) == Respond(1, ErrorCode.UNSUPPORTED_VERSION)
    closed = core.fail(third, ProtocolError("bad body"))
    assert closed == Close(CloseReason.PROTOCOL_ERROR, "bad body")
    # What was answered before the close is still written, in order.
    assert correlation_ids(core.data_to_send()) == [1, 2]


def test_a_telemetry_handler_fault_never_switches_a_client_off_for_good() -> None:
    """Java and franz-go stop pushing for their life on UNKNOWN_SERVER_ERROR (unlisted in
    KIP-714); a fault of ours answers THROTTLING_QUOTA_EXCEEDED: ask again next interval."""
    get_v0 = encode_request(
        RequestHeader(71, 0, 7, "c"), request_type(71, 0)(client_instance_id=uuid.UUID(int=0))
    )
    core = ServerConnection(served=SERVED)
    (served,) = receive(core, get_v0, 0)
    assert isinstance(served, Serve)
    assert core.fail(served.request, RuntimeError("bug")) == Respond(
        0, ErrorCode.THROTTLING_QUOTA_EXCEEDED
    )
    (frame,) = frames_of(core.data_to_send())
    _, body = decode_response(71, 0, frame)
    assert int(body.error_code) == ErrorCode.THROTTLING_QUOTA_EXCEEDED


def test_in_flight_limit_pauses_and_resumes_with_hysteresis() -> None:
    core = ServerConnection(served=SERVED, max_in_flight=4)
    results = receive(core, b"".join(api_versions(c) for c in range(4)), 0)
    assert core.should_pause()
    assert not core.may_resume()
    ids = [r.request.id for r in results if isinstance(r, Serve)]
    core.complete(ids[0], None)
    core.data_to_send()
    assert not core.may_resume()  # 3 in flight: above half
    core.complete(ids[1], None)
    core.data_to_send()
    assert core.may_resume()
    assert not core.should_pause()


def big_request_prefix(size: int) -> bytes:
    header = encode_request_header(RequestHeader(72, 0, 1, "c", None, 2))
    return struct.pack(">i", size) + header


def test_request_budget_is_shared_and_stops_reading_when_spent() -> None:
    budget = RequestBudget(3 * 1024 * 1024)
    woken: list[str] = []
    a = ServerConnection(served=SERVED, budget=budget)
    b = ServerConnection(served=SERVED, budget=budget)
    b.framer.on_readable = lambda: woken.append("b")  # the transport reads on
    size = 2 * 1024 * 1024
    assert receive(a, big_request_prefix(size), 0) == []
    assert budget.used == size
    assert not a.should_pause()
    assert receive(b, big_request_prefix(size), 0) == []
    assert budget.used == size  # b's frame did not fit: nothing reserved, b paused
    assert b.should_pause()
    # A small request is never held back by the budget.
    c = ServerConnection(served=SERVED, budget=budget)
    assert isinstance(receive(c, api_versions(1), 0)[0], Serve)
    # a's request completes: its bytes go back, b may read on.
    rest = size - len(big_request_prefix(size)) + 4
    results = receive(a, b"\x00" * rest, 0)
    assert len(results) == 1
    assert woken == ["b"]
    assert budget.used == size  # now b's
    assert not b.should_pause()


def test_closing_returns_the_reservation() -> None:
    budget = RequestBudget(SMALL_REQUEST_BYTES * 4)
    core = ServerConnection(served=SERVED, budget=budget)
    receive(core, big_request_prefix(SMALL_REQUEST_BYTES * 2), 0)
    assert budget.used == SMALL_REQUEST_BYTES * 2
    core.connection_lost()
    assert budget.used == 0


def test_frames_a_client_sends_past_a_spent_budget_wait_unread() -> None:
    budget = RequestBudget(SMALL_REQUEST_BYTES * 4)
    core = ServerConnection(forwarding=True, budget=budget)
    size = SMALL_REQUEST_BYTES * 3
    frame = encode_request_header(RequestHeader(0, 8, 1, "p", None, 1))
    frame += struct.pack(">hhii", -1, 1, 1000, 0)
    frame += b"\x00" * (size - len(frame))
    other = ServerConnection(forwarding=True, budget=budget)
    assert receive(other, struct.pack(">i", size), 0) == []  # reserved: the budget is spent
    assert receive(core, struct.pack(">i", size) + frame[:100], 0) == []
    assert core.should_pause()
    assert core.framer.waiting
    with pytest.raises(BufferError):  # the transport stops reading: nothing is allocated
        receive(core, frame[100:], 0)
    other.connection_lost()  # its reservation goes back: the waiting frame gets its buffer
    assert not core.framer.waiting
    assert budget.used == size
    (forwarded,) = receive(core, frame[SMALL_REQUEST_BYTES:], 0)  # the scratch held the rest
    assert isinstance(forwarded, Forward)
    assert budget.used == 0


def test_idle_connections_expire_but_trickled_bytes_do_not_count() -> None:
    core = ServerConnection(served=SERVED, idle_ms=1000, now_ms=0)
    assert core.expired(999) is None
    receive(core, api_versions(1), 500)  # a request: activity
    core.complete(0, None)
    core.data_to_send()
    assert core.expired(1499) is None
    receive(core, struct.pack(">i", 100), 1400)  # slowloris: bytes, no request
    receive(core, b"\x00", 1450)
    close = core.expired(1500)
    assert close is not None
    assert close.reason is CloseReason.IDLE


def test_a_request_in_flight_is_not_idle() -> None:
    core = ServerConnection(served=SERVED, idle_ms=1000, now_ms=0)
    receive(core, api_versions(1), 0)
    assert core.expired(5000) is None


def test_request_object_carries_the_body_offset() -> None:
    core = ServerConnection(served=SERVED)
    (result,) = receive(core, api_versions(1), 0)
    assert isinstance(result, Serve)
    request: Request = result.request
    assert request.frame[request.offset :] == api_versions(1)[4 + request.offset :]


def test_client_software_is_recorded_by_the_core_and_bad_names_refused_in_both_modes() -> None:
    def versions(correlation_id: int, name: str, version: str) -> bytes:
        header = RequestHeader(18, 3, correlation_id, "c", None, 2)
        body = request_type(18, 3)(client_software_name=name, client_software_version=version)
        return encode_request(header, body)

    for forwarding in (False, True):
        core = ServerConnection(served={} if forwarding else SERVED, forwarding=forwarding)
        (good,) = receive(core, versions(1, "librdkafka", "2.16.1"), 0)
        assert isinstance(good, Forward if forwarding else Serve)
        assert core.software == ("librdkafka", "2.16.1")
        # Kafka's pattern refuses a trailing dot: INVALID_REQUEST, nothing recorded,
        # never forwarded (an upstream that does not check would let it into the data).
        (bad,) = receive(core, versions(2, "evil", "1.0."), 0)
        assert bad == Respond(1, ErrorCode.INVALID_REQUEST, rejected="client_software")
        assert core.software == ("librdkafka", "2.16.1")
        core.complete(0, None)
        (frame,) = frames_of(core.data_to_send())
        assert struct.unpack_from(">h", frame, 4)[0] == ErrorCode.INVALID_REQUEST
    # v0-v2 carry no software: nothing to record.
    core = ServerConnection(served=SERVED)
    receive(core, api_versions(1, version=2), 0)
    assert core.software is None


def test_a_newer_api_versions_is_refused_as_an_older_broker_refuses_it_even_when_forwarding() -> (
    None
):
    # Java 4.4 clients open with ApiVersions v5, which the codec (and so the proxy's
    # rewrite of the answer) does not read: UNSUPPORTED_VERSION, listing v0-4, and
    # the client retries at v4 (KIP-511).
    core = ServerConnection(forwarding=True)
    header = RequestHeader(18, 5, 1, "java", None, 2)
    (refused,) = receive(core, raw(header, b"\x00"), 0)
    assert refused == Respond(0, ErrorCode.UNSUPPORTED_VERSION)
    (frame,) = frames_of(core.data_to_send())
    _, body = decode_response(18, 0, frame)
    assert int(body.error_code) == ErrorCode.UNSUPPORTED_VERSION
    assert {(int(k.api_key), int(k.min_version), int(k.max_version)) for k in body.api_keys} >= {
        (18, 0, 4)
    }
    (retried,) = receive(core, api_versions(2, version=4), 0)
    assert isinstance(retried, Forward)

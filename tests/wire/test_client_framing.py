"""``wire.client``: the clients' request numbering and response framing."""

from __future__ import annotations

import struct

import pytest

from clientmetrics.wire import ApiKey, ProtocolError, request_type
from clientmetrics.wire.client import ClientFraming, NotKafka


def test_the_first_request_ends_a_line_for_line_based_servers() -> None:
    framing = ClientFraming()
    header = framing.header(ApiKey.API_VERSIONS, 3, "c")
    frame = framing.request(
        header,
        request_type(ApiKey.API_VERSIONS, 3)(client_software_name="c", client_software_version="1"),
    )
    # size, api key, version, then the correlation id: CR LF CR LF
    assert frame[8:12] == b"\r\n\r\n"
    assert framing.header(ApiKey.API_VERSIONS, 3, "c").correlation_id == 0x0D0A0D0B


def test_responses_come_out_whole_with_their_correlation_ids() -> None:
    framing = ClientFraming()
    first = struct.pack(">ii", 8, 7) + b"\x00\x01\x02\x03"
    second = struct.pack(">ii", 4, 8)
    assert framing.feed(first[:5]) == []
    assert framing.feed(first[5:] + second) == [
        (7, struct.pack(">i", 7) + b"\x00\x01\x02\x03"),
        (8, struct.pack(">i", 8)),
    ]


@pytest.mark.parametrize(
    ("reply", "excerpt"),
    [
        (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 400 Bad Request"),
        (b"-ERR unknown command\r\n", "-ERR unknown command"),
        (b"SSH-2.0-OpenSSH_9.2\r\n", "SSH-2.0-OpenSSH_9.2"),
        (b"\xff\xff\xff\xfe\x00", "....."),  # a negative size
        (b"\x00\x00\x00\x02ab", "....ab"),  # too short for a correlation id
    ],
)
def test_another_protocol_is_told_apart_at_its_first_bytes(reply: bytes, excerpt: str) -> None:
    with pytest.raises(NotKafka) as info:
        ClientFraming().feed(reply)
    assert info.value.excerpt == excerpt
    assert str(info.value) == f"not a Kafka broker: it answered {excerpt!r}"


def test_a_bad_frame_after_good_ones_is_a_protocol_error_not_another_protocol() -> None:
    framing = ClientFraming(max_response_bytes=1000)
    framing.feed(struct.pack(">ii", 4, 1))
    with pytest.raises(ProtocolError) as info:
        framing.feed(struct.pack(">i", 5000))
    assert not isinstance(info.value, NotKafka)

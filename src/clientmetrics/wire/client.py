"""The client side of Kafka's framing: numbered requests out, correlated responses in.

Sans-IO, for every client this project has (the admin tool, the simulator): the
caller writes what ``request`` returns and feeds what it reads to ``feed``.

A peer that does not speak Kafka is told apart at its first bytes. The first
request's correlation id is ``FIRST_CORRELATION_ID``, whose bytes are CR LF CR LF:
a line-based server on the port (HTTP, SMTP, Redis...) sees the end of a
malformed request and answers at once, and that answer does not read as a Kafka
frame (its first four bytes, as a size, are far past any response), so the
caller says "not a Kafka broker" in one line instead of waiting for its timeout.
A Kafka broker only echoes correlation ids, whatever their value.
"""

from __future__ import annotations

import struct
from typing import Any

from clientmetrics.wire.errors import ProtocolError
from clientmetrics.wire.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, encode_frame
from clientmetrics.wire.headers import (
    RequestHeader,
    encode_request_header,
    request_header_version,
)
from clientmetrics.wire.messages import encode_request

__all__ = ["FIRST_CORRELATION_ID", "ClientFraming", "NotKafka"]

#: b"\r\n\r\n" as a big-endian int32: see the module's docstring.
FIRST_CORRELATION_ID = 0x0D0A0D0A
_INT32 = struct.Struct(">i")
_EXCERPT = 60


class NotKafka(ProtocolError):
    """The peer answered with bytes that are not a Kafka response (another protocol)."""

    def __init__(self, excerpt: str) -> None:
        self.excerpt = excerpt
        super().__init__(f"not a Kafka broker: it answered {excerpt!r}")


def _excerpt(data: bytes) -> str:
    """The start of what the peer sent, one line, printable."""
    line = data[:200].split(b"\n", 1)[0].rstrip(b"\r")
    text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in line)
    return text[:_EXCERPT] + ("..." if len(text) > _EXCERPT else "")


class ClientFraming:
    """One client connection's request numbering and response framing."""

    __slots__ = ("_decoder", "_first", "_next")

    def __init__(self, max_response_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._decoder = FrameDecoder(max_response_bytes)
        self._next = FIRST_CORRELATION_ID
        #: The peer's first bytes, kept until a frame proves it speaks Kafka.
        self._first: bytes | None = b""

    def next_correlation_id(self) -> int:
        """A correlation id no request in flight on this connection has."""
        correlation_id = self._next
        self._next = (self._next + 1) & 0x7FFFFFFF
        return correlation_id

    def header(self, api_key: int, api_version: int, client_id: str | None) -> RequestHeader:
        """The next request's header (its own correlation id, the version's header layout)."""
        return RequestHeader(
            api_key,
            api_version,
            self.next_correlation_id(),
            client_id,
            None,
            request_header_version(api_key, api_version),
        )

    def request(self, header: RequestHeader, body: Any) -> bytes:
        """The framed request: ``body`` is a message entity (``wire.request_type``)."""
        return encode_request(header, body)

    def raw_request(self, header: RequestHeader, body: bytes) -> bytes:
        """The framed request for a body already encoded."""
        return encode_frame(encode_request_header(header) + body)

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """(correlation id, frame without its size prefix) of each complete response.

        Raises ``NotKafka`` when the peer's first bytes are not a Kafka frame, and
        ``ProtocolError`` for a bad frame later on.
        """
        if self._first is not None:
            self._first += data[: 200 - len(self._first)]
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as exc:
            if self._first is not None:
                raise NotKafka(_excerpt(self._first)) from exc
            raise
        out: list[tuple[int, bytes]] = []
        for frame in frames:
            if len(frame) < 4:
                if self._first is not None:
                    raise NotKafka(_excerpt(self._first))
                raise ProtocolError(f"a {len(frame)}-byte response has no correlation id")
            self._first = None
            out.append((_INT32.unpack_from(frame)[0], frame))
        return out

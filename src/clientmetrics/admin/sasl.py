"""SASL/PLAIN authentication (SaslHandshake v1, SaslAuthenticate v1), as Kafka clients do it.

The wire layer serves no codec for these two APIs, and both versions used here are
non-flexible with a handful of fields, so their bodies are written and read here.
"""

from __future__ import annotations

import struct
from typing import Protocol

from clientmetrics.admin.errors import AdminError
from clientmetrics.wire import ErrorCode

__all__ = ["AdminAuthenticationError", "SaslPlain", "authenticate_plain"]

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class AdminAuthenticationError(AdminError):
    """The broker refused the SASL mechanism or the credentials."""


class SaslPlain:
    """PLAIN credentials; the password never appears in ``repr``."""

    __slots__ = ("password", "username")

    def __init__(self, username: str, password: str) -> None:
        self.username = username
        self.password = password

    def __repr__(self) -> str:
        return f"SaslPlain(username={self.username!r}, password=***)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SaslPlain) and (self.username, self.password) == (
            other.username,
            other.password,
        )

    def __hash__(self) -> int:
        return hash(self.username)

    def token(self) -> bytes:
        """RFC 4616 message: empty authzid, NUL, authcid, NUL, password."""
        return b"\0" + self.username.encode() + b"\0" + self.password.encode()


class _Requester(Protocol):
    address: str

    async def raw_request(self, api_key: int, version: int, body: bytes, what: str) -> bytes: ...


def _string(value: str) -> bytes:
    raw = value.encode()
    return _INT16.pack(len(raw)) + raw


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, size: int) -> bytes:
        if size < 0 or self._pos + size > len(self._data):
            raise AdminError(ErrorCode.UNKNOWN_SERVER_ERROR, "Malformed SASL response")
        chunk = self._data[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def int16(self) -> int:
        return int(_INT16.unpack(self.take(2))[0])

    def int32(self) -> int:
        return int(_INT32.unpack(self.take(4))[0])

    def string(self) -> str | None:
        size = self.int16()
        return None if size == -1 else self.take(size).decode("utf-8", "replace")


async def authenticate_plain(conn: _Requester, credentials: SaslPlain) -> None:
    """Run the PLAIN exchange on a freshly negotiated connection."""
    reply = _Reader(
        await conn.raw_request(SASL_HANDSHAKE, 1, _string("PLAIN"), "the SaslHandshake response")
    )
    code = ErrorCode.for_code(reply.int16())
    mechanisms = [reply.string() or "" for _ in range(max(reply.int32(), 0))]
    if code is not ErrorCode.NONE:
        # Kafka's SaslClientAuthenticator wording.
        raise AdminAuthenticationError(
            code,
            f"Client SASL mechanism 'PLAIN' not enabled in the server, enabled mechanisms "
            f"are [{', '.join(mechanisms)}]",
        )
    token = credentials.token()
    reply = _Reader(
        await conn.raw_request(
            SASL_AUTHENTICATE,
            1,
            _INT32.pack(len(token)) + token,
            "the SaslAuthenticate response",
        )
    )
    code = ErrorCode.for_code(reply.int16())
    message = reply.string()
    if code is not ErrorCode.NONE:
        raise AdminAuthenticationError(code, message)

"""An in-memory broker behind the admin ``Transport`` seam: no sockets, scripted answers.

It decodes each request with the real wire codecs, records (api_key, version) and
answers from its state, so version negotiation and error paths can be driven exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode as KioErrorCode

from clientmetrics.wire import (
    FrameDecoder,
    RequestHeader,
    blank_entity,
    decode_request,
    encode_frame,
    encode_response,
    encode_response_header,
    response_type,
)
from clientmetrics.wire.codec import write_entity


@dataclass
class FakeBroker:
    """Advertises ``versions``; keeps subscriptions in ``configs``."""

    versions: Mapping[int, tuple[int, int]] = field(
        default_factory=lambda: {18: (0, 4), 32: (1, 4), 44: (0, 1), 74: (0, 1)}
    )
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    seen: list[tuple[int, int]] = field(default_factory=list)
    answer: Callable[[RequestHeader, Any], bytes | None] | None = None
    """Overrides the answer to a request when it returns bytes (b"" = disconnect)."""
    silent: bool = False

    async def open(self, host: str, port: int) -> FakeChannel:
        if host == "refused":
            raise ConnectionRefusedError(111, "Connection refused")
        return FakeChannel(self)

    def handle(self, frame: bytes) -> bytes | None:
        header, body = decode_request(frame)
        self.seen.append((header.api_key, header.api_version))
        if self.silent:
            return None
        if self.answer is not None:
            custom = self.answer(header, body)
            if custom is not None:
                return custom
        return encode_response(header, self._body(header, body))

    def _body(self, header: RequestHeader, body: Any) -> Any:
        cls = response_type(header.api_key, header.api_version)
        key = header.api_key
        if key == 18:
            api = _element(cls, "api_keys")
            keys = tuple(
                api(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in self.versions.items()
            )
            return blank_entity(cls, api_keys=keys)
        if key == 74:
            item = _element(cls, "config_resources")
            return blank_entity(
                cls, config_resources=tuple(item(resource_name=n) for n in self.configs)
            )
        if key == 32:
            result, entry = _element(cls, "results"), _element(_element(cls, "results"), "configs")
            results = tuple(
                blank_entity(
                    result,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                    configs=tuple(
                        blank_entity(entry, name=k, value=v, config_source=7)
                        for k, v in self.configs.get(r.resource_name, {}).items()
                    ),
                )
                for r in body.resources
            )
            return blank_entity(cls, results=results)
        if key == 44:
            item = _element(cls, "responses")
            for r in body.resources:
                current = self.configs.setdefault(r.resource_name, {})
                for c in r.configs:
                    if c.config_operation == 1:
                        current.pop(c.name, None)
                    else:
                        current[c.name] = c.value
                if not current:
                    del self.configs[r.resource_name]
            responses = tuple(
                blank_entity(item, resource_type=r.resource_type, resource_name=r.resource_name)
                for r in body.resources
            )
            return blank_entity(cls, responses=responses)
        raise AssertionError(f"unexpected api key {key}")


def _element(cls: type, name: str) -> Any:
    import typing

    return typing.get_args(typing.get_type_hints(cls)[name])[0]


def api_versions_v0_error(header: RequestHeader, versions: Mapping[int, tuple[int, int]]) -> bytes:
    """What a broker sends for an ApiVersions version it does not know: a v0 body."""
    cls = response_type(18, 0)
    api = _element(cls, "api_keys")
    body = cls(
        error_code=KioErrorCode(35),
        api_keys=tuple(
            api(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in versions.items()
        ),
    )
    return encode_frame(encode_response_header(header.correlation_id, 0) + write_entity(body))


class FakeChannel:
    def __init__(self, broker: FakeBroker) -> None:
        self._broker = broker
        self._decoder = FrameDecoder()
        self._inbox: asyncio.Queue[bytes] = asyncio.Queue()
        self.closed = False

    async def send(self, data: bytes) -> None:
        for frame in self._decoder.feed(data):
            reply = self._broker.handle(frame)
            if reply is not None:
                self._inbox.put_nowait(reply)

    async def receive(self) -> bytes:
        return await self._inbox.get()

    async def close(self) -> None:
        self.closed = True

"""Fuzz invariant of the connection core: any bytes give results, never an exception.

Garbage either parses into requests or ends in a ``Close`` naming the protocol's
own reason; whatever the core answered before is still well framed.
"""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clientmetrics.security.base import AuthenticationFailed
from clientmetrics.wire import ApiKey
from clientmetrics.wire.limits import RequestBudget
from clientmetrics.wire.server import (
    Close,
    Forward,
    ListenerPolicy,
    Respond,
    Serve,
    ServerConnection,
)
from tests.wire.shell import receive

SERVED = {
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 1),
    ApiKey.PUSH_TELEMETRY: (0, 1),
}
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class RefusingExchange:
    mechanism = "PLAIN"
    outcome = None

    def respond(self, client_message: bytes, *, now_ms: int) -> bytes:
        raise AuthenticationFailed("Authentication failed")


class RefusingSasl:
    mechanisms = ("PLAIN",)

    def start(self, mechanism: str) -> RefusingExchange:
        return RefusingExchange()


# Frames with a plausible prefix: a served or SASL api key, any version, any rest.
plausible = st.builds(
    lambda key, version, rest: struct.pack(">hhi", key, version, 1) + rest,
    st.sampled_from([0, 3, 17, 18, 36, 71, 72, 74, 999, -1]),
    st.integers(-2, 20),
    st.binary(max_size=64),
).map(lambda payload: struct.pack(">i", len(payload)) + payload)
streams = st.lists(st.one_of(st.binary(max_size=80), plausible), max_size=8)


def run(core: ServerConnection, chunks: list[bytes]) -> None:
    closed = False
    for chunk in chunks:
        results = receive(core, chunk, 0)
        for index, result in enumerate(results):
            assert not closed
            match result:
                case Serve(request) | Forward(request):
                    core.complete(request.id, None)
                case Respond():
                    pass
                case Close():
                    assert index == len(results) - 1
                    assert core.closed
                    closed = True
    data = b"".join(core.data_to_send())
    while data:  # everything written is whole frames
        (size,) = struct.unpack_from(">i", data)
        assert 4 <= size <= len(data) - 4
        data = data[4 + size :]


@given(chunks=streams, forwarding=st.booleans())
@FUZZ
def test_garbage_gives_results_or_a_close(chunks: list[bytes], forwarding: bool) -> None:
    budget = RequestBudget(1 << 20)
    run(ServerConnection(served=SERVED, forwarding=forwarding, budget=budget), chunks)
    run(
        ServerConnection(
            served=SERVED,
            forwarding=forwarding,
            policy=ListenerPolicy(requires_sasl=True, passthrough=True),
        ),
        chunks,
    )
    terminate = ListenerPolicy(requires_sasl=True, sasl=RefusingSasl())
    run(ServerConnection(served=SERVED, policy=terminate), chunks)

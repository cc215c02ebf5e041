"""The driver's way into the connection core, without I/O, for the core's tests.

Production (gateway/driver.py over gateway/transport.py) receives into the
buffers the core's ``framer`` lends, hands each frame it cuts to
``receive_frame`` as it is cut, holds the frames behind a ``Verify`` until
``verified``, and turns a stream the framer refuses into ``framing_failed``'s
close. ``receive`` and ``verified`` here do the same, so that every unit and
fuzz test of the core goes in where production does.
"""

from __future__ import annotations

from collections import deque
from weakref import WeakKeyDictionary

from clientmetrics.wire import ProtocolError
from clientmetrics.wire.server import Result, ServerConnection

__all__ = ["receive", "verified"]


class _Shell:
    def __init__(self, core: ServerConnection) -> None:
        self.core = core
        self.held: deque[bytes | bytearray] = deque()
        self.results: list[Result] = []
        self.now_ms = 0

    def frame_in(self, frame: bytes | bytearray) -> None:
        core = self.core
        if core.closed:
            return  # read before the close took effect
        if core.verifying or self.held:
            self.held.append(frame)
            return
        self.results.append(core.receive_frame(frame, self.now_ms))

    def receive(self, data: bytes, now_ms: int) -> list[Result]:
        self.results, self.now_ms = [], now_ms
        try:
            self.core.framer.feed(data, self.frame_in)
        except ProtocolError as exc:
            if not self.core.closed:
                self.results.append(self.core.framing_failed(exc))
        return self.results

    def verified(self, derived: bytes, now_ms: int) -> list[Result]:
        core = self.core
        results = core.verified(derived, now_ms)
        while self.held and not core.closed and not core.verifying:
            results.append(core.receive_frame(self.held.popleft(), now_ms))
        if core.closed:
            self.held.clear()
        return results


_shells: WeakKeyDictionary[ServerConnection, _Shell] = WeakKeyDictionary()


def _shell(core: ServerConnection) -> _Shell:
    shell = _shells.get(core)
    if shell is None:
        shell = _shells[core] = _Shell(core)
    return shell


def receive(core: ServerConnection, data: bytes, now_ms: int) -> list[Result]:
    """The results of the requests ``data`` completes, as the driver would get them."""
    return _shell(core).receive(data, now_ms)


def verified(core: ServerConnection, derived: bytes, now_ms: int) -> list[Result]:
    """``core.verified``'s answer, then the results of the frames held behind it."""
    return _shell(core).verified(derived, now_ms)

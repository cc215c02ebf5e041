"""A throttle on operator logins: failures counted per source address and per user name.

Each login the dashboard tries costs a SASL authentication against the cluster
or gateway, and a password can be guessed: after ``max_failures`` failed logins
within ``window_s`` from one address, or for one user name, further attempts
from that address or for that name are refused without trying, until the
oldest of those failures leaves the window (the page answers 429 with
``Retry-After``). A successful login clears nothing: failures age out.

Bounded: at most ``max_keys`` addresses and names are remembered (the least
recently failed is forgotten first), each with at most ``max_failures`` times.
No I/O; the clock is a parameter.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LoginThrottle", "ThrottleConfig"]


@dataclass(frozen=True, slots=True)
class ThrottleConfig:
    """How many failed logins a window allows per address and per user, and the bound."""

    max_failures: int = 5
    window_s: float = 60.0
    max_keys: int = 4096


class LoginThrottle:
    """Failed logins by key (``addr:…``, ``user:…``) in a sliding window."""

    def __init__(self, config: ThrottleConfig, clock: Callable[[], float]) -> None:
        self._config = config
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()  # the server answers each request on its own thread

    def retry_after(self, address: str, user: str) -> int:
        """Whole seconds to wait before this address may try this user (0: go ahead)."""
        now = self._clock()
        with self._lock:
            wait = max(self._wait(key, now) for key in _keys(address, user))
        return math.ceil(wait) if wait > 0 else 0

    def failed(self, address: str, user: str) -> None:
        """Count a failed login against the address and the user name."""
        now = self._clock()
        with self._lock:
            for key in _keys(address, user):
                times = self._failures.pop(key, None)
                if times is None:
                    times = deque(maxlen=self._config.max_failures)
                times.append(now)
                self._failures[key] = times  # most recently failed last
            while len(self._failures) > self._config.max_keys:
                self._failures.popitem(last=False)

    def __len__(self) -> int:
        return len(self._failures)

    def _wait(self, key: str, now: float) -> float:
        times = self._failures.get(key)
        if times is None or len(times) < self._config.max_failures:
            return 0.0
        return times[0] + self._config.window_s - now


def _keys(address: str, user: str) -> tuple[str, str]:
    return f"addr:{address}", f"user:{user}"

"""How long to hold back the answer to a failed authentication, per source and user.

Kafka delays every failed authentication by ``connection.failed.authentication.delay.ms``
(100 ms by default). Here the delay doubles with each recent failure from the same
source address, up to a ceiling, so guessing passwords from one address slows down
fast while a user who mistyped once barely notices.

Failures are counted per source and, within it, per user name the client claimed.
A successful authentication forgets only its own user's failures from that source:
logging in with an account one owns between guesses at another account's password
(or at many accounts') no longer resets the delay, while a user who mistyped and
then logged in starts afresh. Memory is bounded: the least recently failing sources
are forgotten first, a source whose last failure is ``forget_after_ms`` old is
dropped as others fail, and a source keeps at most ``max_users_per_source`` names
(failures beyond count for the source and are forgotten only with it); a name longer
than ``_NAME_KEPT`` is kept as its digest (a client may claim a 500 KB one).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field

__all__ = ["FailureThrottle"]

#: Characters of a claimed name kept as such; longer ones are keyed by a digest.
_NAME_KEPT = 256


def _user_key(user: str) -> str:
    if len(user) <= _NAME_KEPT:
        return user
    return "sha256:" + hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(slots=True)
class _Record:
    #: Failures counted for the source (those attributed to a user included).
    failures: int
    last_ms: int
    #: Failures per claimed user name; a success of that user removes its share.
    by_user: dict[str, int] = field(default_factory=dict)


class FailureThrottle:
    """Per-source failure counts that decay; sans-IO (``now_ms`` is passed in)."""

    def __init__(
        self,
        *,
        base_delay_ms: int = 100,
        max_delay_ms: int = 5_000,
        forget_after_ms: int = 60_000,
        max_sources: int = 10_000,
        max_users_per_source: int = 64,
    ) -> None:
        if not 0 <= base_delay_ms <= max_delay_ms:
            raise ValueError("need 0 <= base_delay_ms <= max_delay_ms")
        if max_sources < 1 or forget_after_ms < 1 or max_users_per_source < 1:
            raise ValueError("max_sources, forget_after_ms, max_users_per_source must be positive")
        self.base_delay_ms = base_delay_ms
        self.max_delay_ms = max_delay_ms
        self.forget_after_ms = forget_after_ms
        self.max_sources = max_sources
        self.max_users_per_source = max_users_per_source
        self._sources: OrderedDict[str, _Record] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sources)

    def failed(self, source: str, now_ms: int, user: str | None = None) -> int:
        """Record a failure from ``source`` (claiming ``user``, if known); the delay (ms)
        before answering it."""
        sources = self._sources
        record = sources.pop(source, None)
        if record is None or now_ms - record.last_ms >= self.forget_after_ms:
            record = _Record(0, now_ms)
        record.failures += 1
        record.last_ms = now_ms
        by_user = record.by_user
        if user is not None:
            key = _user_key(user)
            if key in by_user or len(by_user) < self.max_users_per_source:
                by_user[key] = by_user.get(key, 0) + 1
        # In order of last failure: the stale ones are first (``last_ms`` only grows
        # for a source moved to the end, so the first fresh one ends the sweep).
        while sources:
            oldest = next(iter(sources.values()))
            if len(sources) < self.max_sources and now_ms - oldest.last_ms < self.forget_after_ms:
                break
            sources.popitem(last=False)
        sources[source] = record
        if self.base_delay_ms == 0:
            return 0
        # 2**n overflows nothing here: the exponent is capped well below the ceiling.
        factor = 1 << min(record.failures - 1, 30)
        return min(self.max_delay_ms, self.base_delay_ms * factor)

    def succeeded(self, source: str, user: str) -> None:
        """``user`` authenticated from ``source``: forget that user's failures from there
        (and the record, when nothing else is left in it)."""
        record = self._sources.get(source)
        if record is None:
            return
        record.failures -= record.by_user.pop(_user_key(user), 0)
        if record.failures <= 0:
            del self._sources[source]

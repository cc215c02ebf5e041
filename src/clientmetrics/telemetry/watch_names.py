"""The names of watches: temporary subscriptions that carry their own owner and expiry.

A watch (``clientmetrics investigate watch``) keeps no local state: its owner,
expiry (UTC, to the second) and a random id are in the subscription's name,
``investigate.<owner>.<YYYYMMDDTHHMMSSZ>.<8 hex>``. This is the one home of that
format, so that everything that reaps expired watches reads it alike: the
``investigate`` command, and the gateway's housekeeping in its own store.

Pure functions, no clock: the caller says what time it is. Dates are converted
with the proleptic Gregorian calendar's day count (H. Hinnant's ``days_from_civil``),
which is what UTC epoch milliseconds are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["WATCH_PREFIX", "WatchName", "owner_text", "parse_watch_name", "utc_text", "watch_name"]

WATCH_PREFIX = "investigate"
_NAME = re.compile(
    rf"^{WATCH_PREFIX}\.(?P<owner>[A-Za-z0-9_-]{{1,40}})\."
    r"(?P<y>[0-9]{4})(?P<mo>[0-9]{2})(?P<d>[0-9]{2})T(?P<h>[0-9]{2})(?P<mi>[0-9]{2})(?P<s>[0-9]{2})Z"
    r"\.(?P<id>[0-9a-f]{8})$"
)
_DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class WatchName:
    """What a watch's name tells: its owner, expiry and id."""

    name: str
    owner: str
    expires_at_ms: int
    watch_id: str

    def expired(self, now_ms: int) -> bool:
        """Whether the watch is past its expiry at ``now_ms``."""
        return now_ms >= self.expires_at_ms


def owner_text(user: str) -> str:
    """``user`` reduced to what a resource name may carry: letters, digits, ``_`` and ``-``."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", user)[:40]
    return cleaned or "unknown"


def watch_name(owner: str, expires_at_ms: int, watch_id: str) -> str:
    """``investigate.<owner>.<expiry>.<id>``; the expiry is rounded down to the second."""
    if not re.fullmatch(r"[0-9a-f]{8}", watch_id):
        raise ValueError(f"a watch id is 8 lower-case hex digits, not {watch_id!r}")
    stamp = utc_text(expires_at_ms, "{y:04d}{mo:02d}{d:02d}T{h:02d}{mi:02d}{s:02d}Z")
    return f"{WATCH_PREFIX}.{owner_text(owner)}.{stamp}.{watch_id}"


def parse_watch_name(name: str) -> WatchName | None:
    """The watch a subscription name encodes; None for any other subscription
    (including a watch-like name whose date does not exist)."""
    found = _NAME.match(name)
    if found is None:
        return None
    year, month, day = int(found["y"]), int(found["mo"]), int(found["d"])
    hour, minute, second = int(found["h"]), int(found["mi"]), int(found["s"])
    if not (1 <= month <= 12 and 1 <= day <= _month_days(year, month)):
        return None
    if hour > 23 or minute > 59 or second > 59:
        return None
    seconds = ((_days_from_civil(year, month, day) * 24 + hour) * 60 + minute) * 60 + second
    return WatchName(name, found["owner"], seconds * 1000, found["id"])


def utc_text(
    epoch_ms: int, template: str = "{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}Z"
) -> str:
    """``epoch_ms`` as UTC text (ISO 8601 by default), to the second, rounded down."""
    days, ms = divmod(epoch_ms, _DAY_MS)
    year, month, day = _civil_from_days(days)
    seconds = ms // 1000
    return template.format(
        y=year, mo=month, d=day, h=seconds // 3600, mi=seconds // 60 % 60, s=seconds % 60
    )


def _month_days(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a Gregorian date."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """The Gregorian date ``days`` after 1970-01-01."""
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (month <= 2), month, day

"""Watch names: the one format the command and the gateway's reaper read."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from clientmetrics.telemetry.watch_names import parse_watch_name, utc_text, watch_name


def test_names_round_trip_against_the_calendar() -> None:
    rng = random.Random(714)
    stamps = [0, 951782400000, 4107542399000]  # the epoch, 2000-02-29, 2099-12-31T23:59:59
    stamps += [rng.randrange(0, 4102444800) * 1000 + rng.randrange(1000) for _ in range(2000)]
    for ms in stamps:
        when = datetime.fromtimestamp(ms // 1000, tz=UTC)
        name = watch_name("op", ms, "0a1b2c3d")
        assert name == f"investigate.op.{when:%Y%m%dT%H%M%SZ}.0a1b2c3d"
        parsed = parse_watch_name(name)
        assert parsed is not None
        assert parsed.expires_at_ms == ms // 1000 * 1000
        assert utc_text(ms) == f"{when:%Y-%m-%dT%H:%M:%SZ}"


def test_dates_that_do_not_exist_are_not_watches() -> None:
    for stamp in ("20210229T000000Z", "20201301T000000Z", "20200431T000000Z",
                  "20200101T240000Z", "20200101T006000Z", "20200101T000060Z"):  # fmt: skip
        assert parse_watch_name(f"investigate.op.{stamp}.0a1b2c3d") is None
    assert parse_watch_name("investigate.op.20200229T235959Z.0a1b2c3d") is not None


def test_a_watch_id_is_checked_when_made() -> None:
    for bad in ("0A1B2C3D", "0a1b2c3", "0a1b2c3d0"):
        with pytest.raises(ValueError, match=bad):
            watch_name("op", 0, bad)

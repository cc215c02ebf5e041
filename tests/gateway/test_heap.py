"""The heap is trimmed after many connections closed, not more often than every few seconds."""

from __future__ import annotations

import platform

import pytest

from clientmetrics.gateway.heap import HeapTrimmer, malloc_trim


def test_trims_after_enough_closes_and_not_too_often() -> None:
    now = [100.0]
    trims: list[float] = []

    def trim() -> bool:
        trims.append(now[0])
        return True

    trimmer = HeapTrimmer(after_closes=3, every_s=5.0, clock=lambda: now[0], trim=trim)
    now[0] = 106.0
    trimmer.closed()
    trimmer.closed()
    assert not trimmer.maybe_trim()  # two closes only
    trimmer.closed()
    assert trimmer.maybe_trim()
    for _ in range(10):
        trimmer.closed()
    now[0] = 108.0
    assert not trimmer.maybe_trim()  # 2 s after the last trim
    now[0] = 111.0
    assert trimmer.maybe_trim()
    assert trims == [106.0, 111.0]


def test_glibc_gets_its_free_pages_back() -> None:
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("malloc_trim is glibc's")
    assert malloc_trim()

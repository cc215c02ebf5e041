"""The demo's summary is printed after everything stopped, and says so."""

from __future__ import annotations

from clientmetrics.demo.summary import DemoSummary


def _summary(url: str) -> DemoSummary:
    return DemoSummary(3, 1, 2, 10, 100, 1, 1, ("unhealthy-producer-0",), url, "/tmp/d")


def test_the_summary_says_the_dashboard_has_stopped() -> None:
    lines = _summary("http://127.0.0.1:8050/").lines()
    assert "       dashboard: stopped (was http://127.0.0.1:8050/)" in lines
    assert _summary("").lines()[5] == "       dashboard: -"
    assert _summary("x").as_dict()["dashboard_url"] == "x"

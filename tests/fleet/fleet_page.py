"""The dashboard's fleet page as Chromium renders it: each row's coverage and usage cells."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clientmetrics.dashboard import Dashboard, DashboardConfig, DashboardServer
from tests.dashboard.browser import CHROMIUM, CHROMIUM_ARGS

#: (coverage, client.id, produced, consumed, usage source) of one row, as shown.
Shown = tuple[str, str, str, str, str]

_ROW = re.compile(
    r"<tr class=(\w+) data-client-id='([^']*)'>.*?<td class=produced>([^<]*)</td>"
    r"<td class=consumed>([^<]*)</td><td class=source>([^<]*)</td></tr>"
)
_READ = (
    "() => [...document.querySelectorAll('table.fleet tbody tr')].map(r => [r.className,"
    " r.dataset.clientId, r.querySelector('td.produced').innerText,"
    " r.querySelector('td.consumed').innerText, r.querySelector('td.source').innerText,"
    " r.offsetHeight])"
)


def rows_in_browser(data_dir: Path) -> list[Shown]:
    """Every row of the fleet page, as Chromium renders it (the HTML where it has none)."""
    server = DashboardServer(Dashboard(DashboardConfig(data_dir)))
    server.start()
    try:
        if not CHROMIUM.exists():
            page = Dashboard(DashboardConfig(data_dir)).handle("/fleet").body.decode()
            return [(c, i, p, s, src) for c, i, p, s, src in _ROW.findall(page)]
        sync_api = pytest.importorskip("playwright.sync_api")
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.goto(f"{server.url}fleet")
                page.wait_for_selector("table.fleet tbody tr")
                rows = page.evaluate(_READ)
            finally:
                browser.close()
    finally:
        server.stop()
    assert all(row[-1] > 0 for row in rows), rows  # every row is laid out
    return [tuple(row[:-1]) for row in rows]


def amount(shown: str) -> tuple[int, int]:
    """(records, bytes) of a usage cell as shown: ``1,234 rec · 98,765 B``."""
    found = re.fullmatch(r"([\d,]+) rec · ([\d,]+) B", shown.strip())
    assert found is not None, shown
    return int(found[1].replace(",", "")), int(found[2].replace(",", ""))

"""The client page in Chromium: a long list of labels folds and stays inside its box."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from clientmetrics.dashboard import Dashboard, DashboardConfig, DashboardServer
from clientmetrics.telemetry.standard import STANDARD_METRICS
from tests.dashboard.browser import CHROMIUM, CHROMIUM_ARGS
from tests.dashboard.conftest import NOW
from tests.dashboard.tables import CLIENTS_SCHEMA, DataDir, client_row, write, write_findings

pytestmark = pytest.mark.integration


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[DashboardServer, str]]:
    row = client_row(0, NOW)
    # Every standard metric a client can send: the list the issue saw overflow.
    row.update(standard_metrics=sorted(STANDARD_METRICS))
    write(tmp_path / "tables", "clients", [row], CLIENTS_SCHEMA)
    served = DashboardServer(Dashboard(DashboardConfig(tmp_path), clock=NOW.timestamp))
    served.start()
    yield served, str(row["client_instance_id"])
    served.stop()


def test_the_standard_metrics_list_wraps_inside_the_labels_box(
    server: tuple[DashboardServer, str],
) -> None:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium: apt-get install -y chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    dashboard, instance = server
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 800})
            page.goto(f"{dashboard.url}client/{instance}")
            folded = page.evaluate("() => document.querySelector('dl').offsetHeight")
            page.click("dl details summary")  # unfold the list
            sizes = page.evaluate(
                "() => { const dl = document.querySelector('dl');"
                " const dd = [...dl.querySelectorAll('dd')].find("
                "   d => d.previousElementSibling.textContent === 'standard_metrics');"
                " const box = dl.getBoundingClientRect(), item = dd.getBoundingClientRect();"
                " return {scroll: dl.scrollWidth, client: dl.clientWidth, box: box.right,"
                "   item: item.right, page: document.documentElement.scrollWidth,"
                "   view: window.innerWidth, height: item.height, folded: 0}; }"
            )
        finally:
            browser.close()
    assert sizes["scroll"] <= sizes["client"], sizes
    assert sizes["item"] <= sizes["box"], sizes
    assert sizes["page"] <= sizes["view"], sizes
    assert sizes["height"] > 100, sizes  # unfolded onto many lines, not cut off
    assert folded < 300, folded  # folded: the labels stay a compact box (unfolded, 500+)


def test_the_findings_page_fits_the_window_and_leads_to_each_client(tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium: apt-get install -y chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    data = DataDir(tmp_path / "cm-data", NOW).build()
    write_findings(data)
    served = DashboardServer(Dashboard(DashboardConfig(data.root), clock=NOW.timestamp))
    served.start()
    shot = tmp_path / "findings.png"
    try:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(f"{served.url}findings")
                page.screenshot(path=str(shot), full_page=True)
                widths = page.evaluate(
                    "() => ({page: document.documentElement.scrollWidth, view: window.innerWidth})"
                )
                page.click(f"table.findings a[href='/client/{data.ids[6]}']")
                page.wait_for_url(f"**/client/{data.ids[6]}", timeout=60_000)
                heading = page.inner_text("h2 >> nth=0")
                row = page.inner_text("table.findings tbody tr")
            finally:
                browser.close()
    finally:
        served.stop()
    assert widths["page"] <= widths["view"], widths
    assert heading == "Findings"
    assert "slow-broker-requests" in row
    if os.environ.get("UPDATE_SCREENSHOT"):
        shutil.copy(shot, Path(__file__).parents[2] / "docs" / "img" / "findings.png")

"""Issue 35, the bill where people look: the dashboard's tenants panel shows each
tenant's cloud spending this month against its budget with the month's forecast, and a
line per paid pool (nodes up, node time so far), in a real Chromium at 1280 and 420 px.

The service is the one of cloud_site.py (a job really bursts to the paid pool on a
clock the test moves), served over HTTP by uvicorn in this process. Screenshots go to
``ILUCID_SCREENSHOTS`` when set, else the test's tmp_path.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from cloud_site import CloudSite
from dashboard_helpers import chromium, new_tab, overflows
from serve_helpers import free_port

from ilucid.core.cloud import CloudBudget
from ilucid.service.api import build_app

#: In the page: words of the tenants panel that a line break cuts in two.
_BROKEN_WORDS = """() => {
  const broken = [];
  const texts = document.querySelectorAll('#quota-table td, #pool-lines li');
  for (const node of texts) {
    if (!node.getClientRects().length) continue;
    const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
      const re = /\\S+/g;
      for (let m = re.exec(text.data); m; m = re.exec(text.data)) {
        const range = document.createRange();
        range.setStart(text, m.index);
        range.setEnd(text, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}"""


@contextlib.contextmanager
def over_http(site: CloudSite) -> Iterator[str]:
    """The site's API and dashboard behind a real uvicorn server; yields its URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(build_app(site.service), host="127.0.0.1", port=port, log_level="warning")
    )
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        serving.join(timeout=10)
        site.engine.dispose()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[CloudSite, str]]:
    """Alice's second job burst to the cloud half an hour ago; nlp has a budget too."""
    budgets = {"vision": CloudBudget(limit=5000.0), "nlp": CloudBudget(limit=100.0)}
    site = CloudSite(tmp_path, budgets)
    site.burst()
    site.advance(1800)
    with over_http(site) as url:
        yield site, url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as running:
        yield running


@pytest.mark.parametrize("width", [1280, 420])
def test_tenants_panel_shows_cloud_spend_budget_forecast_and_pools(
    site: tuple[CloudSite, str], browser: Any, width: int, tmp_path: Path
) -> None:
    cloud_site, url = site
    shots = Path(os.environ.get("ILUCID_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    with new_tab(browser, width) as tab:
        page = tab.page
        page.goto(f"{url}/#token={cloud_site.admin}")
        page.wait_for_selector("body[data-ready=overview]")
        vision = page.locator("#quota-table tr[data-tenant=vision] td[data-col=cloud]")
        # 2 GPUs x 0.5 h x 2.50 = 2.50 spent; its 1 h estimate: 5.00 expected this month
        assert vision.text_content() == "2.50 of 5,000, forecast 5.00"
        nlp = page.locator("#quota-table tr[data-tenant=nlp] td[data-col=cloud]")
        assert nlp.text_content() == "0.00 of 100, forecast 0.00"
        assert page.locator("#quota-cloud-head").get_attribute("hidden") is None
        (line,) = page.locator("#pool-lines li").all_text_contents()
        # the whole 4-GPU node for half an hour: 4 x 0.5 x 2.50 = 5.00
        assert line == (
            "pool cloud (2.50/GPU-h): 1 of 1 nodes up, cloud jobs running 1;"
            " node time so far 5.00 (2 GPU-h, idle nodes included)"
        )
        if width <= 640:  # a card per row: the cell says what it is
            assert vision.get_attribute("data-label") == "cloud this month"
        page.locator("#quota-panel").screenshot(path=str(shots / f"cloud-bill-{width}.png"))
        assert page.evaluate(_BROKEN_WORDS) == []
        assert overflows(page, allow_scroll=False) == []
        assert tab.errors == []

"""Issue 35, the bill where people look: ``ilucid tenants`` shows each tenant's quota use
and its cloud spending this month (spent, budget, left, forecast) with a line per paid
pool, from a service where a job really burst to the paid pool (tests/service's
cloud_site.py, on a clock the test moves)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from cloud_site import CloudSite

from ilucid.cli.app import build_parser
from ilucid.cli.client import _tenants
from ilucid.core.cloud import CloudBudget

HEADER = ["QUOTA", "USED", "BORROWED", "HELD", "CLOUD SPENT", "BUDGET", "LEFT", "FORECAST"]


def test_tenants_shows_quota_use_cloud_spend_budget_left_forecast_and_pools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = {"vision": CloudBudget(limit=5000.0), "nlp": CloudBudget(gpu_hours=40.0)}
    site = CloudSite(tmp_path, budgets)
    site.burst()
    site.advance(1800)
    site.client.headers["Authorization"] = f"Bearer {site.admin}"
    assert _tenants(site.client, build_parser().parse_args(["tenants"])) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = [c.strip() for c in lines[0].split("  ") if c.strip()]
    assert header == [*HEADER, "TENANT"], lines[0]
    rows = {}
    for line in lines[2:4]:
        cells = [c.strip() for c in line.split("  ") if c.strip()]
        rows[cells[-1]] = cells[:-1]
    # vision: 4 GPUs used (no quota configured), 2 GPUs x 0.5 h x 2.50 spent in the cloud,
    # its 1 h estimate: 5.00 expected this month
    assert rows["vision"] == [
        "-",
        "4",
        "-",
        "4",
        "2.50 (1.0 GPU-h)",
        "5,000",
        "4,998",
        "5.00",
    ], lines
    # nlp: a budget in GPU-hours, nothing spent
    nlp = ["-", "0", "-", "0", "0.00 (0.0 GPU-h)", "40.0 GPU-h", "40.0 GPU-h", "0.00"]
    assert rows["nlp"] == nlp, lines
    after = lines[4:]
    assert (
        "pool cloud (2.50/GPU-h): 1 of 1 nodes up, cloud jobs running 1; node time so far"
        " 5.00 (2.0 GPU-h, idle nodes included)"
    ) in after, after
    assert any("the forecast is an estimate" in line for line in after), after


def test_tenants_without_paid_pools_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = CloudSite(tmp_path, paid=False)
    site.submit(site.alice)
    site.service.reconcile()
    site.client.headers["Authorization"] = f"Bearer {site.alice}"  # a user: its tenant only
    assert _tenants(site.client, build_parser().parse_args(["tenants"])) == 0
    lines = capsys.readouterr().out.splitlines()
    cells = [c.strip() for c in lines[2].split("  ") if c.strip()]
    assert cells == ["-", "2", "-", "2", "-", "-", "-", "-", "vision"], lines
    assert lines[-1].startswith("no paid pool"), lines

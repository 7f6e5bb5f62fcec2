"""Issue 35, the bill where people look: a tenant's cloud spending this month against its
budget, the month's forecast and each pool's node time, in GET /views/quotas and
/metrics, on a service that really bursts (cloud_site.py) on a clock the test moves."""

from __future__ import annotations

from pathlib import Path

import pytest
from cloud_site import BUDGET, CLOUD_GPUS, IDLE_S, PRICE, CloudSite
from prometheus_client.parser import text_string_to_metric_families

from ilucid.core.cloud import CloudBudget


def _cost(gpus: float, seconds: float) -> float:
    return PRICE * gpus * seconds / 3600.0


def test_quotas_view_gives_each_tenant_its_cloud_bill_and_each_pool_its_nodes(
    tmp_path: Path,
) -> None:
    site = CloudSite(tmp_path)
    site.burst()
    site.advance(1800)
    view = site.quotas(site.admin)
    rows = {row["tenant"]: row for row in view["tenants"]}
    bill = rows["vision"]["cloud"]
    assert bill["month"] == "2026-12"
    assert bill["spent"] == pytest.approx(_cost(2, 1800))
    assert bill["spent_gpu_hours"] == pytest.approx(2 * 1800 / 3600)
    assert bill["budget"] == BUDGET and bill["left"] == pytest.approx(BUDGET - _cost(2, 1800))
    # spent + the running job's expected remaining half hour (estimate 3600 s)
    assert bill["forecast"] == pytest.approx(_cost(2, 3600))
    assert bill["running_jobs"] == 1 and not bill["reaches_budget"]
    # the quota fields are still there
    assert rows["vision"]["holding"] == 4 and rows["vision"]["used"] == 4
    (pool,) = view["pools"]
    assert pool["pool"] == "cloud" and pool["nodes"] == 1 and pool["nodes_up"] == 1
    assert pool["price_per_gpu_hour"] == PRICE and pool["running_jobs"] == 1
    # the site pays for the whole node (4 GPUs) while it is up
    assert pool["node_cost"] == pytest.approx(_cost(CLOUD_GPUS, 1800))
    # a user sees only its own tenant's row (nlp has no row: it neither spends nor holds)
    assert [r["tenant"] for r in site.quotas(site.alice)["tenants"]] == ["vision"]
    assert site.quotas(site.bob)["tenants"] == []


def test_a_tenant_with_a_budget_is_listed_and_the_forecast_stops_at_the_budget(
    tmp_path: Path,
) -> None:
    budgets = {"vision": CloudBudget(limit=8.0), "nlp": CloudBudget(limit=100.0)}
    site = CloudSite(tmp_path, budgets)
    site.burst()  # its run's 5.00 (+ start-up) fits the budget of 8
    site.advance(4000)  # past its estimate: expected to run as long again
    rows = {row["tenant"]: row["cloud"] for row in site.quotas(site.admin)["tenants"]}
    assert rows["vision"]["spent"] == pytest.approx(_cost(2, 4000))
    assert rows["vision"]["forecast"] == 8.0 and rows["vision"]["reaches_budget"]
    # nlp spent nothing and runs nothing, but has a budget: its row says so
    assert rows["nlp"]["spent"] == 0 and rows["nlp"]["left"] == 100.0
    assert rows["nlp"]["forecast"] == 0


def test_without_paid_pools_the_view_has_no_cloud(tmp_path: Path) -> None:
    site = CloudSite(tmp_path, paid=False)
    site.submit(site.alice)
    site.service.reconcile()
    view = site.quotas(site.admin)
    assert view["pools"] == [] and [r["cloud"] for r in view["tenants"]] == [None]
    families = {f.name: f for f in text_string_to_metric_families(site.client.get("/metrics").text)}
    # every family is served (as the docs promise), without samples
    assert families["ilucid_cloud_cost"].samples == []
    assert families["ilucid_cloud_nodes_up"].samples == []


def _scrape(site: CloudSite) -> dict[str, dict[tuple[str, ...], float]]:
    text = site.client.get("/metrics").text
    found: dict[str, dict[tuple[str, ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("ilucid_cloud_"):
                key = tuple(sorted(sample.labels.values()))
                found.setdefault(sample.name, {})[key] = sample.value
    return found


def test_metrics_give_the_bill_per_tenant_and_pool_and_the_node_cost_never_drops(
    tmp_path: Path,
) -> None:
    site = CloudSite(tmp_path)
    _, cloud = site.burst()
    burst_at = site.now
    site.advance(1800)
    m = _scrape(site)
    assert m["ilucid_cloud_spent_month"][("vision",)] == pytest.approx(_cost(2, 1800))
    assert m["ilucid_cloud_cost_total"][("vision",)] == pytest.approx(_cost(2, 1800))
    assert m["ilucid_cloud_budget_left"] == {("vision",): pytest.approx(BUDGET - _cost(2, 1800))}
    assert m["ilucid_cloud_forecast_month"][("vision",)] == pytest.approx(_cost(2, 3600))
    assert m["ilucid_cloud_nodes_up"] == {("cloud",): 1.0}
    assert m["ilucid_cloud_node_cost_total"][("cloud",)] == pytest.approx(_cost(4, 1800))
    assert m["ilucid_cloud_power_changes_total"] == {("up",): 1.0, ("down",): 0.0}

    site.backend.end(cloud, 0)  # the cloud job ends: its charge closes, the node idles
    site.advance(60)
    ended_at = site.now
    spent = _cost(2, ended_at - burst_at)
    seen = []
    for step in (300, 200, 200, 300):  # the release is due 600 s after the job ended
        site.advance(step)
        m = _scrape(site)
        seen.append(m["ilucid_cloud_node_cost_total"][("cloud",)])
        assert m["ilucid_cloud_cost_total"][("vision",)] == pytest.approx(spent)
        assert m["ilucid_cloud_forecast_month"][("vision",)] == pytest.approx(spent)
    assert seen == sorted(seen), seen  # a counter: never lower than the last scrape
    assert seen[-1] == pytest.approx(_cost(CLOUD_GPUS, ended_at + IDLE_S - burst_at))
    assert m["ilucid_cloud_nodes_up"] == {("cloud",): 0.0}
    assert m["ilucid_cloud_power_changes_total"] == {("up",): 1.0, ("down",): 1.0}
    assert site.backend.asked == [("up", "cloud0"), ("down", "cloud0")]

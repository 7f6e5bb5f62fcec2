"""/metrics as Prometheus reads it (issue 19): parsed by ``prometheus_client``'s own
parser, with the families and types :data:`METRIC_NAMES` promises, the process and GC
collectors, a tenant name that cannot break out of its label, one registry per
service, and a Grafana dashboard that names only metrics the service serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.job_store import JobRequest
from ilucid.service.metrics_export import METRIC_NAMES
from ilucid.service.scheduler_service import SchedulerService

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "ilucid.json"
EVIL = 'lab"} 1\nevil_metric{a="b'


class Site:
    """A service on ``gpus`` virtual GPUs with /metrics public, driven by hand."""

    def __init__(self, root: Path, gpus: int = 2) -> None:
        root.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{root / 'ilucid.db'}"
        migrate(url)
        self.service = SchedulerService(
            make_engine(url), LocalBackend(root, GpuInventory(gpus, "virtual", 0, "v"))
        )
        self.client = TestClient(build_app(self.service, metrics_public=True))
        create_token(self.service.engine, "root", "ops", admin=True)

    def submit(self, gpus: int, tenant: str, job_class: str = "training") -> str:
        request = JobRequest(["sleep", "30"], gpus=gpus, job_class=job_class, tenant=tenant)
        return self.service.submit(request)

    def scrape(self) -> dict[str, object]:
        response = self.client.get("/metrics")
        assert response.status_code == 200, response.text
        return {f.name: f for f in text_string_to_metric_families(response.text)}


def _samples(families: dict[str, object], name: str) -> list[Sample]:
    family = families[name]
    return list(family.samples)  # type: ignore[attr-defined]


@pytest.fixture
def site(tmp_path: Path):  # type: ignore[no-untyped-def]
    site = Site(tmp_path)
    site.submit(2, "vision")  # runs: both GPUs
    site.submit(1, "nlp", "inference")  # waits (and may preempt: it is inference)
    site.submit(1, EVIL)
    site.service.reconcile()
    site.service.reconcile()
    yield site
    for job in site.service.backend.observe().jobs:
        site.service.backend.stop(job)


def _family_name(metric: str) -> str:
    """The name the parser gives a family: a counter's without ``_total``."""
    return metric.removesuffix("_total") if METRIC_NAMES[metric] == "counter" else metric


def test_every_promised_family_is_served_with_its_type(site: Site) -> None:
    families = site.scrape()
    for metric, kind in METRIC_NAMES.items():
        name = _family_name(metric)
        assert name in families, f"{metric} missing from /metrics"
        assert families[name].type == kind, metric  # type: ignore[attr-defined]
    # every ilucid family is one the service promises (and the docs list)
    served = {n for n in families if n.startswith("ilucid_")}
    assert served == {_family_name(m) for m in METRIC_NAMES}
    # prometheus-client's own collectors
    assert "process_resident_memory_bytes" in families
    assert "process_cpu_seconds" in families
    assert "python_gc_collections" in families
    # the names before the prometheus-client rewrite are gone
    assert not {"ilucid_gpus_total", "ilucid_pass_seconds", "ilucid_gpu_utilisation"} & set(
        families
    )


def test_the_figures_are_the_clusters(site: Site) -> None:
    families = site.scrape()
    (total,) = _samples(families, "ilucid_gpus")
    (busy,) = _samples(families, "ilucid_gpus_busy")
    (ratio,) = _samples(families, "ilucid_gpu_utilisation_ratio")
    assert total.value == 2 and busy.value == 2 - site.service.scheduler.free.free_total
    assert ratio.value == pytest.approx(busy.value / total.value)
    states = {s.labels["state"]: s.value for s in _samples(families, "ilucid_jobs")}
    assert sum(states.values()) == 3
    assert set(states) >= {"pending", "running", "succeeded", "failed", "cancelled"}
    pending = _samples(families, "ilucid_pending_jobs")
    assert sum(s.value for s in pending) == states["pending"]
    decisions = _samples(families, "ilucid_decisions")
    assert all(s.name == "ilucid_decisions_total" for s in decisions)
    assert any(s.labels == {"action": "start", "reason": "Scheduled"} for s in decisions)


def test_a_tenant_name_with_quotes_and_a_newline_stays_one_label(tmp_path: Path) -> None:
    site = Site(tmp_path, gpus=1)
    site.submit(1, "first")
    site.service.reconcile()  # holds the only GPU: the next two wait
    site.submit(1, EVIL)
    site.submit(1, "plain")
    site.service.reconcile()
    text = site.client.get("/metrics").text
    assert not any(line.startswith("evil_metric") for line in text.splitlines())
    families = site.scrape()
    assert "evil_metric" not in families
    tenants = {s.labels["tenant"]: s.value for s in _samples(families, "ilucid_pending_jobs")}
    assert tenants[EVIL] == 1.0 and set(tenants) <= {EVIL, "plain", "first"}
    assert len(tenants) == 2  # one of the three runs


def test_the_pass_histograms_are_cumulative_and_count_every_pass(site: Site) -> None:
    passes = site.service.pass_latency.count
    families = site.scrape()
    for name in ("ilucid_pass_duration_seconds", "ilucid_reconcile_duration_seconds"):
        samples = _samples(families, name)
        buckets = [s for s in samples if s.name == f"{name}_bucket"]
        values = [s.value for s in buckets]
        assert values == sorted(values), f"{name}: buckets not cumulative"
        assert buckets[-1].labels["le"] == "+Inf"
        (count,) = (s.value for s in samples if s.name == f"{name}_count")
        assert values[-1] == count > 0
    (count,) = (
        s.value
        for s in _samples(families, "ilucid_pass_duration_seconds")
        if s.name.endswith("_count")
    )
    assert count == passes


def test_each_service_has_its_own_registry(tmp_path: Path) -> None:
    one, two = Site(tmp_path / "one", gpus=1), Site(tmp_path / "two", gpus=3)
    one.submit(1, "a")
    one.service.reconcile()
    first, second = one.scrape(), two.scrape()
    assert _samples(first, "ilucid_gpus")[0].value == 1
    assert _samples(second, "ilucid_gpus")[0].value == 3
    assert sum(s.value for s in _samples(first, "ilucid_jobs")) == 1
    assert sum(s.value for s in _samples(second, "ilucid_jobs")) == 0
    # scraping twice registers nothing twice (prometheus-client would refuse)
    assert two.client.get("/metrics").status_code == 200


# -- the Grafana dashboard --------------------------------------------------------------
def _dashboard() -> dict[str, object]:
    loaded = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _exprs(dashboard: dict[str, object]) -> list[str]:
    panels = dashboard["panels"]
    assert isinstance(panels, list) and panels
    return [t["expr"] for p in panels for t in p["targets"]]


def test_the_dashboard_is_a_grafana_dashboard_on_a_prometheus_variable() -> None:
    dashboard = _dashboard()
    assert dashboard["title"] == "ilucid" and dashboard["uid"]
    assert isinstance(dashboard["schemaVersion"], int)
    variables = dashboard["templating"]["list"]  # type: ignore[index]
    source = next(v for v in variables if v["type"] == "datasource")
    assert source["query"] == "prometheus"
    ids = set()
    for panel in dashboard["panels"]:  # type: ignore[attr-defined]
        assert panel["datasource"]["uid"] == f"${{{source['name']}}}", panel["title"]
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]) and panel["targets"]
        ids.add(panel["id"])
    assert len(ids) == len(dashboard["panels"])  # type: ignore[arg-type]
    titles = " ".join(p["title"] for p in dashboard["panels"])  # type: ignore[attr-defined]
    for wanted in ("busy", "Pending", "p50", "p99", "Preemptions", "reason"):
        assert wanted in titles, wanted
    assert any("histogram_quantile(0.99" in e for e in _exprs(dashboard))


def test_the_dashboard_names_only_metrics_and_labels_the_service_serves(site: Site) -> None:
    families = site.scrape()
    samples = [s for f in families.values() for s in f.samples]  # type: ignore[attr-defined]
    names = {s.name for s in samples}
    labels: dict[str, set[str]] = {}
    for s in samples:
        labels.setdefault(s.name, set()).update(s.labels)
    dashboard = _dashboard()
    used = set()
    for expr in _exprs(dashboard):
        metrics = set(re.findall(r"\b((?:ilucid|process|python)_[a-z_]+)\b", expr))
        assert metrics, expr
        missing = metrics - names
        assert not missing, f"{expr}: {missing} not in /metrics"
        used |= metrics
        # labels grouped by exist on the metrics grouped (``le``: a histogram's)
        for group in re.findall(r"\bby \(([^)]*)\)", expr):
            for label in (g.strip() for g in group.split(",")):
                assert any(label in labels[m] for m in metrics), f"{expr}: no label {label}"
    for variable in dashboard["templating"]["list"]:  # type: ignore[index]
        query = variable.get("definition", "")
        assert not query or set(re.findall(r"ilucid_[a-z_]+", query)) <= names, query
    # the panels the issue asks for read the metrics behind them
    for needed in (
        "ilucid_gpus_busy",
        "ilucid_gpus",
        "ilucid_pending_jobs",
        "ilucid_pass_duration_seconds_bucket",
        "ilucid_preemptions_total",
        "ilucid_decisions_total",
    ):
        assert needed in used, needed

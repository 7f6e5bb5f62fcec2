"""The service's unauthenticated surface, kept small on purpose (issue 16), and the
metric names the docs and the Grafana dashboard give, checked against /metrics.

/metrics needs an admin token unless the service was started with
``--metrics-public``; there is no /docs or /redoc (they load script from a CDN on
the dashboard's origin), only /openapi.json; every response says
``X-Content-Type-Options: nosniff`` and carries a Content-Security-Policy that
forbids framing (the dashboard's allows only its own script and style files, and no
inline code).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.dashboard import CONTENT_SECURITY_POLICY
from ilucid.service.db import make_engine, migrate
from ilucid.service.edge import STRICT_CSP
from ilucid.service.metrics_export import METRIC_NAMES
from ilucid.service.scheduler_service import SchedulerService

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import free_port, serve_command


class Site:
    def __init__(self, root: Path, metrics_public: bool = False) -> None:
        url = f"sqlite:///{root / 'ilucid.db'}"
        migrate(url)
        engine = make_engine(url)
        self.service = SchedulerService(
            engine, LocalBackend(root, GpuInventory(2, "virtual", 0, "v"))
        )
        self.client = TestClient(
            build_app(self.service, metrics_public=metrics_public), raise_server_exceptions=False
        )
        self.admin = {"Authorization": f"Bearer {create_token(engine, 'root', 'ops', admin=True)}"}
        self.user = {"Authorization": f"Bearer {create_token(engine, 'alice', 'lab')}"}


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path)


# -- /metrics ---------------------------------------------------------------------------
def test_metrics_need_an_admin_token_by_default(site: Site) -> None:
    assert site.client.get("/metrics").status_code == 401
    bad = site.client.get("/metrics", headers={"Authorization": "Bearer nonsense"})
    assert bad.status_code == 401
    user = site.client.get("/metrics", headers=site.user)
    assert user.status_code == 403 and "--metrics-public" in user.json()["detail"]
    admin = site.client.get("/metrics", headers=site.admin)
    assert admin.status_code == 200 and "# TYPE ilucid_jobs gauge" in admin.text


def test_metrics_public_serves_them_without_a_token(tmp_path: Path) -> None:
    site = Site(tmp_path, metrics_public=True)
    response = site.client.get("/metrics")
    assert response.status_code == 200 and "ilucid_gpus 2.0" in response.text
    # the rest of the API still needs its token
    assert site.client.get("/jobs").status_code == 401


def _wait_up(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    server.kill()
    raise AssertionError("ilucid serve did not come up")


@pytest.mark.parametrize("public", [False, True])
def test_ilucid_serve_metrics_public_flag(tmp_path: Path, public: bool) -> None:
    port = free_port()
    extra = ["--metrics-public"] if public else []
    server = subprocess.Popen(
        serve_command(tmp_path / "data", port, 1, 0.5, *extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url, server)
        assert httpx.get(url + "/metrics", timeout=10).status_code == (200 if public else 401)
        token = (tmp_path / "data" / "admin.token").read_text().strip()
        with_token = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {token}"})
        assert with_token.status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=15)


# -- /docs, /redoc, /openapi.json -------------------------------------------------------
def test_no_cdn_backed_docs_pages_but_the_openapi_schema_stays(site: Site) -> None:
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        assert site.client.get(path).status_code == 404, path
    schema = site.client.get("/api/v1/openapi.json")
    assert schema.status_code == 200
    assert "/api/v1/jobs/{job_id}/explain" in schema.json()["paths"]


# -- security headers -------------------------------------------------------------------
def test_the_dashboard_has_a_strict_csp_allowing_only_its_own_files(site: Site) -> None:
    response = site.client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    csp = response.headers["content-security-policy"]
    assert csp == CONTENT_SECURITY_POLICY
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    # the page's script and style are files it serves itself: no inline code may run
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert "<style" not in response.text
    assert all(" src=" in tag for tag in re.findall(r"<script[^>]*>", response.text))
    assert directives["connect-src"] == "'self'"
    assert "unsafe" not in csp and "http" not in csp and "*" not in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    assert len(response.headers.get_list("content-security-policy")) == 1


@pytest.mark.parametrize(
    ("method", "path", "who", "status"),
    [
        ("GET", "/healthz", None, 200),
        ("GET", "/openapi.json", None, 200),
        ("GET", "/jobs", "user", 200),
        ("GET", "/jobs", None, 401),
        ("GET", "/metrics", "admin", 200),
        ("GET", "/history.csv", "user", 403),
        ("GET", "/nowhere", None, 404),
        ("GET", "/docs", None, 404),
        ("POST", "/jobs", "user", 422),
    ],
)
def test_every_response_says_nosniff_and_may_not_be_framed(
    site: Site, method: str, path: str, who: str | None, status: int
) -> None:
    headers = {"admin": site.admin, "user": site.user}.get(who or "", {})
    response = site.client.request(
        method, path, headers=headers, json={} if method == "POST" else None
    )
    assert response.status_code == status, response.text
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["content-security-policy"] == STRICT_CSP
    assert "frame-ancestors 'none'" in STRICT_CSP


def test_an_oversized_body_is_refused_with_413_and_the_same_headers(site: Site) -> None:
    big = b"x" * (2 << 20)
    headers = {**site.user, "Content-Type": "application/json"}
    with_length = site.client.post("/jobs", content=big, headers=headers)

    def chunks():  # type: ignore[no-untyped-def]
        yield big

    chunked = site.client.post("/jobs", content=chunks(), headers=headers)
    for response in (with_length, chunked):
        assert response.status_code == 413, response.text
        assert "bytes" in response.json()["detail"]
        assert response.headers["x-content-type-options"] == "nosniff"
    # a body within the limit is still read whole and accepted
    small = site.client.post("/jobs", json={"command": ["echo", "y" * 1000]}, headers=site.user)
    assert small.status_code == 201, small.text


# -- the metric names the docs give -----------------------------------------------------
def _documented_metric_names() -> dict[str, set[str]]:
    """Every ``ilucid_*`` name in the README, docs/ and deploy/, by file."""
    root = Path(__file__).resolve().parents[2]
    files = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    files += sorted(p for p in (root / "deploy").rglob("*") if p.suffix in (".md", ".json"))
    found: dict[str, set[str]] = {}
    for path in files:
        names = set(re.findall(r"\bilucid_[a-z_]+\b", path.read_text(encoding="utf-8")))
        if names:
            found[str(path.relative_to(root))] = names
    return found


def test_the_docs_name_the_metrics_served_and_every_one_is_documented(tmp_path: Path) -> None:
    site = Site(tmp_path, metrics_public=True)
    text = site.client.get("/metrics").text
    served = set()
    for family in text_string_to_metric_families(text):
        served |= {family.name, *(s.name for s in family.samples)}
        if family.type == "counter":  # named with _total even before a first sample
            served.add(f"{family.name}_total")
    documented = _documented_metric_names()
    assert "README.md" in documented and "deploy/grafana/ilucid.json" in documented
    for where, names in documented.items():
        assert names <= served, f"{where} names metrics /metrics lacks: {names - served}"
    assert set(METRIC_NAMES) <= documented["README.md"], "README: list every metric"

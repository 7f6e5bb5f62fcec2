"""The dashboard's own routes (``/views/...``) and the uptime record, without a browser.

The service runs in-process on virtual GPUs (SQLite, the local backend), its loop
driven by hand, so each step is observable; the history, quota and outlook answers
are checked against what the database and the policy's own quota book hold.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete
from sqlalchemy.orm import Session

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.core.policies.tiered import TierConfig, TieredPolicy
from ilucid.core.quota import TenantQuota
from ilucid.estimators.duration import Contribution
from ilucid.estimators.live import DurationEstimate, format_estimate
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.history import timeline
from ilucid.service.routes_views import estimate_terms
from ilucid.service.scheduler_service import SchedulerService
from ilucid.service.uptime import UptimeRow, down_periods

QUOTAS = {"vision": TenantQuota(guaranteed=1, borrow_limit=2), "nlp": TenantQuota(guaranteed=2)}


class Site:
    """A service on 4 virtual GPUs with an admin, alice (vision) and bob (nlp)."""

    def __init__(self, root: Path, policy: Callable[[str], object] | None = None) -> None:
        url = f"sqlite:///{root / 'ilucid.db'}"
        migrate(url)
        self.engine = make_engine(url)
        self.admin = create_token(self.engine, "root", "ops", admin=True)
        self.alice = create_token(self.engine, "alice", "vision")
        self.bob = create_token(self.engine, "bob", "nlp")
        backend = LocalBackend(root, GpuInventory(4, "virtual", 0, "virtual"), grace_s=2.0)
        extra = {"policy_factory": policy} if policy is not None else {}
        self.service = SchedulerService(self.engine, backend, policy="tiered", **extra)  # type: ignore[arg-type]
        self.client = TestClient(build_app(self.service))

    def get(self, path: str, token: str) -> object:
        response = self.client.get(path, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200, response.text
        return response.json()

    def submit(self, token: str, command: list[str], gpus: int = 1) -> str:
        response = self.client.post(
            "/jobs",
            json={"command": command, "gpus": gpus, "estimate_s": 600},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def until(self, what: str, done: Callable[[], bool], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            self.service.reconcile()
            time.sleep(0.05)

    def state(self, job_id: str) -> str:
        job = self.get(f"/jobs/{job_id}", self.admin)
        assert isinstance(job, dict)
        return str(job["state"])

    def stop_all(self) -> None:
        for job in self.service.backend.observe().jobs:
            self.service.backend.stop(job)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    site = Site(tmp_path, lambda name: TieredPolicy(TierConfig(quotas=QUOTAS)))
    yield site
    site.stop_all()


def test_history_pages_filters_and_shows_users_only_their_jobs(site: Site) -> None:
    ended = [site.submit(site.alice, ["true"]) for _ in range(3)]
    ended.append(site.submit(site.bob, ["sh", "-c", "exit 4"]))
    site.until("four ends", lambda: all(site.state(j) in ("succeeded", "failed") for j in ended))
    jobs = site.get("/jobs", site.admin)
    assert isinstance(jobs, list)
    newest_first = [
        j["id"] for j in sorted(jobs, key=lambda j: (j["end_time"], j["id"]), reverse=True)
    ]
    every = site.get("/views/history", site.admin)
    assert isinstance(every, dict)
    assert [j["id"] for j in every["jobs"]] == newest_first and every["total"] == 4
    assert every["users"] == ["alice", "bob"] and every["tenants"] == ["nlp", "vision"]
    first = site.get("/views/history?limit=3", site.admin)
    assert [j["id"] for j in first["jobs"]] == newest_first[:3]  # type: ignore[index]
    assert first["start"] == 0 and first["next_cursor"] == newest_first[2]  # type: ignore[index]
    second = site.get(f"/views/history?limit=3&cursor={first['next_cursor']}", site.admin)  # type: ignore[index]
    assert [j["id"] for j in second["jobs"]] == newest_first[3:]  # type: ignore[index]
    assert second["start"] == 3 and second["next_cursor"] is None  # type: ignore[index]
    assert second["prev_cursor"] is None  # type: ignore[index]  # the page before is the first
    # a page of one: three back from the last is a cursor, two back the first page
    ones = site.get(f"/views/history?limit=1&cursor={newest_first[2]}", site.admin)
    assert [j["id"] for j in ones["jobs"]] == [newest_first[3]]  # type: ignore[index]
    assert ones["start"] == 3 and ones["prev_cursor"] == newest_first[1]  # type: ignore[index]
    failed = site.get("/views/history?state=failed", site.admin)
    assert [(j["id"], j["exit_code"]) for j in failed["jobs"]] == [(ended[3], 4)]  # type: ignore[index]
    by_tenant = site.get("/views/history?tenant=vision&user=alice", site.admin)
    assert sorted(j["id"] for j in by_tenant["jobs"]) == sorted(ended[:3])  # type: ignore[index]
    # alice sees her own jobs only, whatever user she asks for
    hers = site.get("/views/history?user=bob", site.alice)
    assert sorted(j["id"] for j in hers["jobs"]) == sorted(ended[:3])  # type: ignore[index]
    assert hers["users"] == ["alice"]  # type: ignore[index]
    headers = {"Authorization": f"Bearer {site.admin}"}
    for bad in ("state=running", "limit=0", "limit=201", "cursor=" + "x" * 65):
        assert site.client.get(f"/views/history?{bad}", headers=headers).status_code == 422
    # a cursor names a place only a job's owner may know of, and only an ended job has one
    theirs = site.client.get(
        f"/views/history?cursor={ended[3]}", headers={"Authorization": f"Bearer {site.alice}"}
    )
    assert theirs.status_code == 404 and "no job" in theirs.json()["detail"], theirs.text
    running = site.submit(site.alice, ["sleep", "600"])
    unended = site.client.get(f"/views/history?cursor={running}", headers=headers)
    assert unended.status_code == 422 and "has not ended" in unended.json()["detail"]
    site.client.post(f"/api/v1/jobs/{running}/cancel", headers=headers)
    assert site.client.get("/views/history").status_code == 401


def test_quota_panel_shows_guarantee_use_and_borrowing(site: Site) -> None:
    jobs = [site.submit(site.alice, ["sleep", "30"]) for _ in range(2)]
    site.until("alice's two jobs", lambda: all(site.state(j) == "running" for j in jobs))
    answer = site.get("/views/quotas", site.admin)
    assert isinstance(answer, dict)
    assert answer["quotas"] is True and answer["note"] == "" and answer["policy"] == "tiered"
    policy = site.service.scheduler.policy
    assert isinstance(policy, TieredPolicy)
    rows = {row["tenant"]: row for row in answer["tenants"]}
    assert set(rows) == {"nlp", "vision"}
    vision = rows["vision"]
    assert (vision["guaranteed"], vision["borrow_limit"], vision["used"]) == (1, 2, 2)
    assert vision["borrowed"] == policy.quotas.borrowing("vision") == 1
    assert vision["holding"] == 2 and vision["configured"] is True
    assert (rows["nlp"]["guaranteed"], rows["nlp"]["used"], rows["nlp"]["borrowed"]) == (2, 0, 0)
    # a user sees only their own tenant's row
    mine = site.get("/views/quotas", site.alice)
    assert [row["tenant"] for row in mine["tenants"]] == ["vision"]  # type: ignore[index]
    assert site.get("/views/quotas", site.bob)["tenants"][0]["used"] == 0  # type: ignore[index]


@pytest.mark.parametrize(
    ("policy", "says"),
    [("fifo", "The policy fifo keeps no tenant quotas"), ("tiered", "No tenant quota is")],
)
def test_quota_panel_without_quotas_says_so(tmp_path: Path, policy: str, says: str) -> None:
    site = Site(tmp_path)
    if policy != "tiered":
        site.service.set_policy(policy)
    job = site.submit(site.bob, ["sleep", "30"], gpus=2)
    site.until("bob's job", lambda: site.state(job) == "running")
    try:
        answer = site.get("/views/quotas", site.admin)
        assert isinstance(answer, dict)
        assert answer["quotas"] is False and answer["note"].startswith(says)
        [row] = answer["tenants"]
        assert (row["tenant"], row["holding"], row["borrowed"]) == ("nlp", 2, None)
        assert row["used"] == (None if policy == "fifo" else 2)
    finally:
        site.stop_all()


def test_outlook_has_the_expected_start_and_position(site: Site) -> None:
    running = [site.submit(site.bob, ["sleep", "30"], gpus=2) for _ in range(2)]
    site.until("bob's jobs", lambda: all(site.state(j) == "running" for j in running))
    waiting = site.submit(site.alice, ["true"], gpus=2)
    site.service.reconcile()
    outlook = site.get(f"/views/jobs/{waiting}", site.alice)
    [(_, position, start)] = [e for e in site.service.queue() if e[0] == waiting]
    assert isinstance(outlook, dict) and outlook["state"] == "pending"
    assert start is not None and outlook["position"] == position
    assert outlook["expected_start"] == start.median > outlook["now"]
    # the range is taken at each answer's own moment (its early end can be "now")
    assert outlook["expected_start_p10"] == pytest.approx(start.low, abs=5)
    assert outlook["expected_start_p90"] == pytest.approx(start.high, abs=5)
    assert start.low <= start.median <= start.high
    assert outlook["assumes"].startswith("in ")
    assert outlook["estimate"]["source"] == "user" and outlook["estimate"]["model"] is None
    # another user's job is not revealed; a running one has no expected start
    headers = {"Authorization": f"Bearer {site.bob}"}
    assert site.client.get(f"/views/jobs/{waiting}", headers=headers).status_code == 404
    assert site.get(f"/views/jobs/{running[0]}", site.bob)["expected_start"] is None  # type: ignore[index]


def test_estimate_terms_read_back_what_format_estimate_wrote() -> None:
    terms = tuple(
        Contribution(f"t{i}", value, f"f{i}=v{i}")
        for i, value in enumerate((0.91, -0.42, 0.33, -0.25, 0.18, 0.07, -0.03))
    )
    intercept = 6.5
    seconds = math.expm1(intercept + sum(t.value for t in terms))
    note = format_estimate(DurationEstimate(seconds, "v7", intercept, terms, ""))
    read = estimate_terms(f"estimate 600 s given by the user; the model's: {note}")
    assert read is not None and read["version"] == "v7" and read["intercept"] == intercept
    named = read["terms"]
    assert [t["term"] for t in named[:5]] == [f"f{i}=v{i}" for i in range(5)]
    assert named[5]["term"] == "2 more terms" and named[5]["value"] == pytest.approx(0.04)
    total = read["intercept"] + sum(t["value"] for t in named)
    assert total == pytest.approx(math.log1p(seconds), abs=0.01 * len(named))
    assert estimate_terms("estimate 12 s: median of alice's past jobs") is None


def test_down_periods_are_the_gaps_between_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'up.db'}"
    migrate(url)
    engine = make_engine(url)
    with TestClient(build_app(SchedulerService(engine, _backend(tmp_path)))):
        pass  # the lifespan records a run
    assert down_periods(engine, 0.0, 2e10) == []  # one run: never down
    with Session(engine) as session:
        session.execute(delete(UptimeRow))
        for started, seen in ((0, 100), (150, 300), (250, 400), (500, 600)):
            session.add(UptimeRow(started=started, last_seen=seen))
        session.commit()
    assert down_periods(engine, 0, 1000) == [(100, 150), (400, 500)]
    assert down_periods(engine, 120, 450) == [(120, 150), (400, 450)]
    assert down_periods(engine, 160, 390) == []
    assert timeline(engine, 0, 1000)["down"] == [[100, 150], [400, 500]]


def _backend(root: Path) -> LocalBackend:
    return LocalBackend(root, GpuInventory(1, "virtual", 0, "virtual"), grace_s=1.0)


def test_each_start_of_the_api_is_a_run_and_a_stop_its_end(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    migrate(url)
    engine = make_engine(url)
    now = [1000.0]
    service = SchedulerService(engine, _backend(tmp_path), clock=lambda: now[0])
    admin = {"Authorization": f"Bearer {create_token(engine, 'root', 'ops', admin=True)}"}
    with TestClient(build_app(service)):
        now[0] = 1100.0
    now[0] = 1500.0
    with TestClient(build_app(service)) as client:
        now[0] = 1600.0
        answer = client.get("/timeline?minutes=60", headers=admin).json()
    assert answer["down"] == [[1100.0, 1500.0]]
    assert down_periods(engine, 0, 1e9) == [(1100.0, 1500.0)]

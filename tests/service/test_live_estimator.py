"""The live duration model, end to end on a real ``ilucid serve`` (SQLite, local backend).

40 short jobs of three users with different typical run times finish; once 20
have, the duration model is refitted in the service's worker process while the
reconcile loop keeps its pass latency; later jobs carry the model's version and
``explain`` shows its terms; ``ilucid model refit`` makes the next version. Then
the service is killed with SIGKILL while a refit is held (``ILUCID_REFIT_GATE``)
and restarted: every job is still there and the previous model is loaded.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from ilucid.service.auth import create_token
from ilucid.service.db import make_engine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import free_port, run_ilucid, serve_command

#: typical run time (s) per user: what the model should learn
TYPICAL = {"alice": 0.2, "bob": 0.8, "carol": 1.6}
JOBS = 40


def _wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _histograms(url: str) -> dict[str, dict[str, float]]:
    """``{metric: {le: cumulative count, "sum": s, "count": n}}`` of the pass histograms."""
    found: dict[str, dict[str, float]] = {}
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        for name in ("ilucid_pass_duration_seconds", "ilucid_reconcile_duration_seconds"):
            if not line.startswith(name + "_"):
                continue
            key, value = line.rsplit(" ", 1)
            entry = found.setdefault(name, {})
            if "_bucket{" in key:
                entry[key.split('le="')[1].rstrip('"}')] = float(value)
            else:
                entry[key.rsplit("_", 1)[1]] = float(value)
    return found


def _window(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Passes between two snapshots: count, mean, and the bucket bounds of p99 and max."""
    count = after["count"] - before["count"]
    bounds = sorted((float(k), k) for k in after if k not in ("sum", "count", "+Inf"))
    p99 = worst = float("inf")
    for bound, key in bounds:
        within = after[key] - before[key]
        if p99 == float("inf") and within >= 0.99 * count:
            p99 = bound
        if worst == float("inf") and within >= count:
            worst = bound
    mean = (after["sum"] - before["sum"]) / count if count else 0.0
    return {"count": count, "mean": mean, "p99_le": p99, "max_le": worst}


def test_the_duration_model_learns_live_and_survives_a_crash_mid_refit(tmp_path: Path) -> None:
    rng = random.Random(11)
    data = tmp_path / "data"
    gate = tmp_path / "gate"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "ILUCID_REFIT_GATE": str(gate)}
    command = serve_command(
        data, port, 16, 0.1, "--model-min-jobs", "20", "--refit-every", "1000", "--metrics-public"
    )

    def start() -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            _wait(lambda: _healthy(url), 30, "the service to answer")
        except AssertionError:
            process.kill()
            raise
        return process

    server = start()
    try:
        admin = {"Authorization": f"Bearer {(data / 'admin.token').read_text().strip()}"}
        engine = make_engine(f"sqlite:///{data / 'ilucid.db'}")
        users = {
            name: {"Authorization": f"Bearer {create_token(engine, name, 'lab')}"}
            for name in TYPICAL
        }
        before = _histograms(url)
        accepted = []
        for _ in range(JOBS):
            name = rng.choice(list(TYPICAL))
            gpus = rng.choice([1, 2, 4])
            seconds = round(TYPICAL[name] * (1 + gpus / 4) * rng.uniform(0.9, 1.1), 2)
            body = {"command": ["sleep", str(seconds)], "gpus": gpus}
            response = httpx.post(f"{url}/jobs", json=body, headers=users[name], timeout=10)
            assert response.status_code == 201, response.text
            accepted.append(response.json()["id"])

        def model() -> dict[str, Any]:
            return dict(httpx.get(f"{url}/model", headers=admin, timeout=10).json())

        # the first model is fitted in the background once 20 jobs have finished
        _wait(lambda: model()["refitting"], 60, "the first refit to start")
        refit_began = _histograms(url)
        _wait(lambda: model()["version"] == 1, 90, "duration model v1")
        refit_ended = _histograms(url)
        baseline = _window(
            before["ilucid_reconcile_duration_seconds"],
            refit_began["ilucid_reconcile_duration_seconds"],
        )
        during = _window(
            refit_began["ilucid_reconcile_duration_seconds"],
            refit_ended["ilucid_reconcile_duration_seconds"],
        )
        core_baseline = _window(
            before["ilucid_pass_duration_seconds"], refit_began["ilucid_pass_duration_seconds"]
        )
        core_during = _window(
            refit_began["ilucid_pass_duration_seconds"], refit_ended["ilucid_pass_duration_seconds"]
        )
        print(f"reconcile passes before the refit: {baseline}; during it: {during}")
        print(f"core passes before the refit: {core_baseline}; during it: {core_during}")
        assert during["count"] >= 10, "the loop kept passing while the model was fitted"
        assert during["max_le"] <= 0.5, f"a pass took longer than 0.5 s during the refit: {during}"
        # the mean, not the p99 of ~16 passes (that is their single slowest, and one
        # pass sharing 2 cores with the fit may land in the next bucket): the loop must
        # not wait for the fit, which the 0.5 s bound on every pass already shows
        assert during["mean"] <= max(0.05, 4 * baseline["mean"]), (baseline, during)
        assert core_during["p99_le"] <= max(0.05, 4 * core_baseline["p99_le"]), core_during

        def all_ended() -> bool:
            jobs = httpx.get(f"{url}/jobs", headers=admin, timeout=10).json()
            return all(j["state"] == "succeeded" for j in jobs) and len(jobs) == JOBS

        _wait(all_ended, 60, "the 40 jobs to succeed")

        # a later job: estimated by model v1, explained term by term
        later = httpx.post(
            f"{url}/jobs", json={"command": ["true"], "gpus": 4}, headers=users["carol"]
        ).json()["id"]
        shown = httpx.get(f"{url}/jobs/{later}", headers=admin, timeout=10).json()
        assert shown["estimate_version"] == "v1" and shown["model_estimate_s"] > 0
        explained = httpx.get(f"{url}/jobs/{later}/explain", headers=admin, timeout=10).json()
        text = explained["estimate"]["text"]
        assert explained["estimate"]["source"] == "v1"
        assert text.startswith("estimate ") and " by duration model v1 = exp(" in text, text
        assert "[" in text and text.endswith(") - 1"), text
        cli_env = {**os.environ, "ILUCID_URL": url, "ILUCID_TOKEN": admin["Authorization"][7:]}
        cli = run_ilucid("explain", later, env=cli_env)
        assert cli.returncode == 0, cli.stderr
        assert text in cli.stdout, cli.stdout
        # a user's own estimate counts, and the model's is still shown beside it
        own = httpx.post(
            f"{url}/jobs",
            json={"command": ["true"], "gpus": 1, "estimate_s": 30},
            headers=users["alice"],
        ).json()["id"]
        own_text = httpx.get(f"{url}/jobs/{own}/explain", headers=users["alice"]).json()
        assert own_text["estimate"]["source"] == "user"
        # ... counted by alice's measured accuracy (none yet: half) against the model's
        assert "the user's 30 s counted 50%" in own_text["estimate"]["text"]
        assert "duration model v1" in own_text["estimate"]["text"]

        # on demand: the CLI asks, the worker fits, the answer is the new version
        refit = run_ilucid("model", "refit", "--wait", "120", env=cli_env)
        assert refit.returncode == 0, refit.stderr
        assert refit.stdout.strip() == "duration model v2 is live"
        refused = httpx.post(f"{url}/model/refit", headers=users["bob"], timeout=10)
        assert refused.status_code == 403
        _wait(_all_ended(url, admin), 30, "the two later jobs to end")

        # crash: hold a refit (v3) after fitting, before saving; kill -9 the service there
        gate.touch()
        started = httpx.post(f"{url}/model/refit", headers=admin, timeout=10).json()
        assert started == {"status": "started", "version": 3}
        _wait(lambda: Path(f"{gate}.reached").exists(), 90, "the refit to reach the gate")
        assert model()["refitting"] is True
        jobs_before = {j["id"]: j["state"] for j in httpx.get(f"{url}/jobs", headers=admin).json()}
        server.send_signal(signal.SIGKILL)
        server.wait()
        server = start()  # the gate stays: an orphaned worker, were one left, stays held
        status = model()
        assert status["version"] == 2 and status["refitting"] is False, status
        jobs_after = {j["id"]: j["state"] for j in httpx.get(f"{url}/jobs", headers=admin).json()}
        assert jobs_after == jobs_before, "no job lost or changed by the crash"
        assert set(accepted) <= set(jobs_after)
        # the orphaned worker died with its service: it never wrote v3
        assert not (data / "models" / "duration-v3.pkl").exists()
        again = httpx.post(
            f"{url}/jobs", json={"command": ["true"], "gpus": 1}, headers=users["bob"]
        ).json()["id"]
        again_job = httpx.get(f"{url}/jobs/{again}", headers=admin).json()
        assert again_job["estimate_version"] == "v2"
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()


def _all_ended(url: str, headers: dict[str, str]) -> Any:
    def check() -> bool:
        jobs = httpx.get(f"{url}/jobs", headers=headers, timeout=10).json()
        return all(j["state"] in ("succeeded", "failed") for j in jobs)

    return check


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_median_fallback_is_explained_and_an_early_refit_is_refused(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from ilucid.backends.local import LocalBackend
    from ilucid.backends.local_host import GpuInventory
    from ilucid.service.api import build_app
    from ilucid.service.db import migrate
    from ilucid.service.duration_keeper import DurationKeeper
    from ilucid.service.scheduler_service import SchedulerService

    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    admin = {"Authorization": f"Bearer {create_token(engine, 'root', 'ops', admin=True)}"}
    alice = {"Authorization": f"Bearer {create_token(engine, 'alice', 'lab')}"}
    keeper = DurationKeeper(tmp_path / "models", min_jobs=30)
    backend = LocalBackend(tmp_path, GpuInventory(2, "virtual", 0, "virtual"))
    service = SchedulerService(engine, backend, durations=keeper)
    client = TestClient(build_app(service))
    first = client.post("/jobs", json={"command": ["true"]}, headers=alice).json()["id"]
    _wait(
        lambda: (
            service.reconcile() is not None
            and client.get(f"/jobs/{first}", headers=alice).json()["state"] == "succeeded"
        ),
        15,
        "the first job",
    )
    second = client.post("/jobs", json={"command": ["true"]}, headers=alice).json()["id"]
    estimate = client.get(f"/jobs/{second}/explain", headers=alice).json()["estimate"]
    assert estimate["source"] == "median" and estimate["version"] == "median"
    assert estimate["text"].startswith("estimate ")
    assert estimate["text"].endswith(
        ": median of alice's past jobs; too little history for a model: 1 of 30 finished jobs"
    )
    first_estimate = client.get(f"/jobs/{first}/explain", headers=alice).json()["estimate"]
    assert first_estimate["source"] == "none" and first_estimate["seconds"] is None
    refused = client.post("/model/refit", headers=admin)
    assert refused.status_code == 409
    assert refused.json()["detail"] == "too little history for a model: 1 of 30 finished jobs"
    assert client.get("/model", headers=alice).json()["version"] == 0
    keeper.close()

"""A job runs once, as its user, in its directory, contained (issue 29).

Each test runs a real ``ilucid serve`` as people run it, and reproduces one of the
issue's findings: a relative data directory (1), a runner hijacked through the
job's directory (4), processes that escape the job with ``setsid`` (5), output
without bound (6), and users without a Unix account sharing one uid (7). The
tests that switch users need root (CI runs as root); the others run as anyone.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import free_port, run_ilucid

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="switching users needs root (CI runs as root)")


class Site:
    """A running ``ilucid serve`` and tokens for users without a Unix account."""

    def __init__(self, url: str, data: Path, log: Path, tokens: dict[str, str]) -> None:
        self.url, self.data, self.log, self.tokens = url, data, log, tokens

    def headers(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}

    def submit(self, user: str, command: list[str], **fields: Any) -> str:
        body = {"command": command, "gpus": 1, **fields}
        answer = httpx.post(f"{self.url}/jobs", json=body, headers=self.headers(user), timeout=10)
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])

    def job(self, user: str, job_id: str) -> dict[str, Any]:
        answer = httpx.get(f"{self.url}/jobs/{job_id}", headers=self.headers(user), timeout=10)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def wait(self, user: str, job_id: str, states: tuple[str, ...], timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.job(user, job_id)
            if job["state"] in states:
                return job
            time.sleep(0.05)
        raise AssertionError(f"{job_id} never reached {states}: {job}\n{self.log.read_text()}")

    def logs(self, user: str, job_id: str, stream: str = "stdout") -> str:
        answer = httpx.get(
            f"{self.url}/jobs/{job_id}/logs",
            params={"stream": stream},
            headers=self.headers(user),
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        return answer.text

    def story(self, user: str, job_id: str) -> str:
        answer = httpx.get(
            f"{self.url}/jobs/{job_id}/explain", headers=self.headers(user), timeout=10
        )
        assert answer.status_code == 200, answer.text
        return answer.text


@contextlib.contextmanager
def serving(tmp_path: Path, *extra: str, users: tuple[str, ...] = ("bob",)) -> Iterator[Site]:
    data, port, log = tmp_path / "data", free_port(), tmp_path / "serve.log"
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "ilucid.cli", "serve", "--data-dir", str(data)]
    command += ["--gpus", "2", "--port", str(port), "--interval", "0.1", "--grace", "5", *extra]
    with log.open("wb") as output:
        server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            assert time.monotonic() < deadline and server.poll() is None, log.read_text()
            time.sleep(0.1)
        tokens = {"admin": (data / "admin.token").read_text().strip()}
        for user in users:
            made = run_ilucid(
                "token", "create", "--user", user, "--tenant", "lab", "--data-dir", str(data),
                env=dict(os.environ),
            )  # fmt: skip
            assert made.returncode == 0, made.stderr
            tokens[user] = made.stdout.strip()
        yield Site(url, data, log, tokens)
    finally:
        server.terminate()
        server.wait(timeout=15)


def _world_dir(path: Path) -> Path:
    """A directory every account can enter (pytest's own temporary folders are 0700)."""
    path.mkdir(parents=True, exist_ok=True)
    for folder in [path, *path.parents]:
        if folder == Path("/"):
            break
        folder.chmod(folder.stat().st_mode | 0o055)
    return path


def _processes_with(text: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", text], capture_output=True, text=True, check=False)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


def _sleepers(seconds: str) -> list[str]:
    """Pids of the processes that are exactly ``sleep <seconds>``."""
    return [
        line.split()[0]
        for line in _processes_with(f"sleep {seconds}")
        if line.split()[1:] == ["sleep", seconds]
    ]


# -- finding 1: a relative data directory ------------------------------------------------


def test_a_relative_data_dir_runs_each_job_once_from_anywhere(tmp_path: Path) -> None:
    """``ilucid serve`` started with ``--data-dir .ilucid`` (as ``make serve`` does): the
    runner once got that relative path and the job, in another directory, never found
    its exit file, so it was relaunched for ever."""
    checkout = _world_dir(tmp_path / "checkout")
    port = free_port()
    command = [sys.executable, "-m", "ilucid.cli", "serve", "--data-dir", ".ilucid", "--gpus"]
    command += ["2", "--port", str(port), "--interval", "0.1"]
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ILUCID_")}
    with log.open("wb") as output:
        server = subprocess.Popen(command, cwd=checkout, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not (checkout / ".ilucid" / "url").exists():
            assert time.monotonic() < deadline and server.poll() is None, log.read_text()
            time.sleep(0.1)
        cli = [sys.executable, "-m", "ilucid.cli"]
        submitted = subprocess.run(
            [*cli, "submit", "--gpus", "1", "--", "sh", "-c", "echo ran-once"],
            cwd=checkout, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        job_id = submitted.stdout.split()[-1]
        deadline = time.monotonic() + 30
        while True:
            shown = subprocess.run(
                [*cli, "explain", job_id], cwd=checkout, env=env, capture_output=True,
                text=True, timeout=60, check=False,
            )  # fmt: skip
            if "succeeded" in shown.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert "-> succeeded" in shown.stdout, shown.stdout + log.read_text()
        assert shown.stdout.count("started [backend: launched]") == 1, shown.stdout
        assert "vanished" not in shown.stdout
    finally:
        server.terminate()
        server.wait(timeout=15)


# -- finding 4: the runner, hijacked through the job's directory -----------------------------

PLANT = """import pathlib
pathlib.Path({proof!r}).write_text("planted code ran as uid %d" % __import__("os").getuid())
"""


def _plant(folder: Path, proof: Path) -> list[list[str]]:
    """Shell commands a job runs to plant ``ilucid.backends.runner`` (and a
    ``sitecustomize``) in ``folder``: what a hijacker writes."""
    code = PLANT.format(proof=str(proof))
    files = {
        "ilucid/__init__.py": code,
        "ilucid/backends/__init__.py": code,
        "ilucid/backends/runner.py": code,
        "sitecustomize.py": code,
        "runpy.py": code,
    }
    script = f"mkdir -p '{folder}/ilucid/backends' && " + " && ".join(
        f"printf '%s' '{text}' > '{folder}/{name}'" for name, text in files.items()
    )
    return [["sh", "-c", script]]


@needs_root
def test_code_planted_in_a_jobs_directory_never_runs_as_root(tmp_path: Path) -> None:
    """A user's job plants ``ilucid/backends/runner.py`` in a shared directory and in
    its own working directory; the next jobs launched there never run it."""
    shared = _world_dir(tmp_path / "shared")
    shared.chmod(0o1777)  # like /tmp: anyone may write there
    proof = _world_dir(tmp_path / "proof") / "planted"
    proof.parent.chmod(0o1777)
    with serving(tmp_path, users=("mallory", "victim")) as site:
        (planter,) = _plant(shared, proof)
        job = site.submit("mallory", planter, cwd=str(shared))
        assert site.wait("mallory", job, ("succeeded", "failed"))["state"] == "succeeded", (
            site.logs("mallory", job, "stderr")
        )
        assert (shared / "ilucid" / "backends" / "runner.py").exists()
        for user in ("victim", "mallory"):
            ran = site.submit(user, ["sh", "-c", "echo fine"], cwd=str(shared))
            done = site.wait(user, ran, ("succeeded", "failed"))
            assert done["state"] == "succeeded", site.logs(user, ran, "stderr")
            assert site.logs(user, ran).strip() == "fine"
    assert not proof.exists(), proof.read_text()


# -- finding 5: processes that leave the job -------------------------------------------------


def _started_sleeper(seconds: str) -> str:
    """The pid of the one ``sleep <seconds>`` process, once it runs (10 s at most)."""
    deadline = time.monotonic() + 10
    while not (found := _sleepers(seconds)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(found) == 1, f"not one sleep {seconds} running: {found}"
    return found[0]


def _escaping(seconds: str, then: str) -> list[str]:
    return ["sh", "-c", f"setsid -f sleep {seconds} </dev/null >/dev/null 2>&1; {then}"]


def _gpus_in_use(site: Site) -> int:
    nodes = httpx.get(f"{site.url}/nodes", headers=site.headers("admin"), timeout=10).json()
    return sum(int(node["gpus"]) - int(node["free_gpus"]) for node in nodes)


@pytest.mark.parametrize("ending", ["cancel", "success"])
def test_no_process_of_a_job_outlives_it(tmp_path: Path, ending: str) -> None:
    """``setsid -f`` leaves the job's process group; it must not keep running (with the
    job's GPU) once the job is cancelled or has succeeded."""
    marker = f"40{os.getpid() % 1000:03d}.{1 if ending == 'cancel' else 2}"
    then = "exec sleep 300" if ending == "cancel" else "sleep 0.5; exit 0"
    with serving(tmp_path) as site:
        job = site.submit("bob", _escaping(marker, then))
        site.wait("bob", job, ("running",))
        _started_sleeper(marker)
        asked = time.monotonic()
        if ending == "cancel":
            answer = httpx.delete(f"{site.url}/jobs/{job}", headers=site.headers("bob"))
            assert answer.status_code == 200, answer.text
        ended = site.wait("bob", job, ("cancelled", "succeeded", "failed"))
        assert ended["state"] == ("cancelled" if ending == "cancel" else "succeeded")
        # the job is recorded ended, and its GPU free, only once none of it is left
        assert _sleepers(marker) == [], "a process of the job outlived it"
        assert _gpus_in_use(site) == 0
        if ending == "cancel":
            assert time.monotonic() - asked < 2.0 + 1.0  # 2 s, and the test's own polling


def test_no_process_of_a_preempted_job_holds_its_gpus(tmp_path: Path) -> None:
    """An inference job preempts a training job that left a ``setsid`` process behind:
    the inference job starts only once nothing of the training job is left."""
    marker = f"40{os.getpid() % 1000:03d}.3"
    with serving(tmp_path) as site:
        training = site.submit("bob", _escaping(marker, "exec sleep 300"), gpus=2)
        site.wait("bob", training, ("running",))
        _started_sleeper(marker)
        asked = time.monotonic()
        inference = site.submit("bob", ["sleep", "30"], gpus=1, **{"class": "inference"})
        site.wait("bob", inference, ("running",))
        deadline = time.monotonic() + 10  # decided first; launched once its GPUs are free
        while not site.job("bob", inference)["gpu_indices"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert site.job("bob", inference)["gpu_indices"], "the inference job never launched"
        # the inference job runs on the GPUs only once the training job is wholly gone
        assert _sleepers(marker) == [], "the preempted job's process outlived its GPUs"
        assert time.monotonic() - asked < 2.0 + 1.0
        assert site.job("bob", training)["state"] == "pending"
        httpx.delete(f"{site.url}/jobs/{inference}", headers=site.headers("bob"))
        httpx.delete(f"{site.url}/jobs/{training}", headers=site.headers("bob"))


# -- finding 6: output without bound ---------------------------------------------------------


def test_a_jobs_output_is_capped_with_its_head_and_tail_kept(tmp_path: Path) -> None:
    """50 MB of stdout against ``--max-log-mb 5``: the log stays under 6 MB, keeps its
    first and last lines, says what was cut, and so does ``explain``."""
    writer = (
        "import sys; out = sys.stdout; out.write('FIRST-LINE\\n');"
        " [out.write('x' * 1023 + '\\n') for _ in range(50 * 1024)]; out.write('LAST-LINE\\n')"
    )
    with serving(tmp_path, "--max-log-mb", "5") as site:
        job = site.submit("bob", ["python3", "-c", writer])
        done = site.wait("bob", job, ("succeeded", "failed"), timeout=120)
        assert done["state"] == "succeeded", site.logs("bob", job, "stderr")
        log = site.data / "jobs" / job / "stdout.log"
        size = log.stat().st_size
        assert 4 * 2**20 < size < 6 * 2**20, size
        text = log.read_bytes()
        assert text.startswith(b"FIRST-LINE\n") and text.endswith(b"LAST-LINE\n")
        assert b"bytes cut here" in text
        story = site.story("bob", job)
        assert "stdout" in story and "cut" in story, story


# -- finding 7: one uid for every user without an account --------------------------------------


@needs_root
def test_users_without_an_account_get_uids_of_their_own(tmp_path: Path) -> None:
    """Two users without a Unix account: their jobs run as different uids, neither can
    kill the other's job, nor read its command line through ``ps``."""
    marker = f"40{os.getpid() % 1000:03d}.7"
    with serving(tmp_path, users=("bob", "carol")) as site:
        victim = site.submit("carol", ["sh", "-c", f"id -u; exec sleep {marker}"])
        site.wait("carol", victim, ("running",))
        sleeper = _started_sleeper(marker)
        attack = f"id -u; ps -eo args | grep -c '^sleep {marker}'; kill -9 {sleeper} 2>&1; true"
        attacker = site.submit("bob", ["sh", "-c", attack])
        site.wait("bob", attacker, ("succeeded", "failed"))
        out = site.logs("bob", attacker).split("\n")
        bob_uid, seen = int(out[0]), int(out[1])
        assert seen == 0, "bob's job saw carol's command line"
        assert "Operation not permitted" in out[2], out
        assert site.job("carol", victim)["state"] == "running", "bob's job killed carol's"
        httpx.delete(f"{site.url}/jobs/{victim}", headers=site.headers("carol"))
        site.wait("carol", victim, ("cancelled",))
        carol_uid = int(site.logs("carol", victim).split()[0])
        assert bob_uid != carol_uid and 0 not in (bob_uid, carol_uid)
        for uid in (bob_uid, carol_uid):
            with pytest.raises(KeyError):
                pwd.getpwuid(uid)  # a uid of its own, not a real account's (nobody's)
        # and the same user keeps the same uid
        again = site.submit("bob", ["id", "-u"])
        site.wait("bob", again, ("succeeded",))
        assert int(site.logs("bob", again)) == bob_uid


@needs_root
def test_a_directory_the_jobs_account_cannot_enter_is_refused_at_submission(
    tmp_path: Path,
) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with serving(tmp_path) as site:
        answer = httpx.post(
            f"{site.url}/jobs",
            json={"command": ["true"], "gpus": 0, "cwd": str(private)},
            headers=site.headers("bob"),
            timeout=10,
        )
        assert answer.status_code == 403, answer.text  # the job's account may not go there
        assert "cwd" in answer.text and "cannot enter" in answer.text


@needs_root
def test_without_a_uid_range_a_root_service_refuses_unmapped_users(tmp_path: Path) -> None:
    with serving(tmp_path, "--dynamic-uids", "none") as site:
        answer = httpx.post(
            f"{site.url}/jobs", json={"command": ["true"]}, headers=site.headers("bob")
        )
        assert answer.status_code == 403, answer.text
        assert "--unix-user" in answer.text and "run_as" in answer.text


def test_serve_says_which_containment_is_in_force(tmp_path: Path) -> None:
    with serving(tmp_path) as site:
        deadline = time.monotonic() + 10
        while "containment:" not in site.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        said = site.log.read_text()
    assert "containment: cgroup v2" in said or "containment: processes found by" in said, said
    if ROOT and shutil.which("mount"):
        assert "/proc" in said

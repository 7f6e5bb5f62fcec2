"""``ilucid serve`` as a user runs it (issue 19): it says what stopping leaves running
and what a start re-adopts, writes where it listens so the client commands find it,
and a malformed request gets the same one sentence from the CLI and the API."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import run_ilucid, serve_command

ROOT = Path(__file__).resolve().parents[2]


def _start(data: Path, *extra: str) -> tuple[subprocess.Popen[str], str, dict[str, str]]:
    """``ilucid serve --port 0`` (any free port) on 2 virtual GPUs; its URL as the URL
    file in ``data`` says, and an environment without ILUCID_URL (the client commands
    must find the service through ``--data-dir``)."""
    (data / "url").unlink(missing_ok=True)
    server = subprocess.Popen(
        serve_command(data, 0, 2, 0.2, *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("ILUCID_URL", "ILUCID_TOKEN")}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (data / "url").exists():
        if server.poll() is not None:
            raise AssertionError(f"serve ended: {server.communicate()[0]}")
        time.sleep(0.1)
    url = (data / "url").read_text().strip()
    while time.monotonic() < deadline:
        if run_ilucid("nodes", "--data-dir", str(data), env=env).returncode == 0:
            return server, url, env
        time.sleep(0.2)
    server.kill()
    raise AssertionError(f"serve did not come up: {server.communicate()[0]}")


def _stop(server: subprocess.Popen[str], sig: int) -> str:
    server.send_signal(sig)
    printed = server.communicate(timeout=30)[0]
    assert server.returncode == 0, printed
    return printed


def _state(data: Path, job: str, env: dict[str, str]) -> str:
    listed = run_ilucid("jobs", "--data-dir", str(data), env=env).stdout
    return next(line.split()[4] for line in listed.splitlines() if line.startswith(job))


def _pid(data: Path, job: str) -> int:
    return int((data / "jobs" / job / "pid").read_text().split()[0])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in _proc_state(pid)


def _proc_state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2 :].split()[0]


def test_stop_says_what_keeps_running_and_start_what_it_re_adopts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server, url, env = _start(data)
    common = ("--data-dir", str(data))
    jobs = [
        run_ilucid("submit", *common, "--gpus", "1", "--", "sleep", "120", env=env).stdout.strip()
        for _ in range(3)
    ]  # two run on the 2 GPUs, one waits
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            states = {job: _state(data, job, env) for job in jobs}
            if sorted(states.values()) == ["pending", "running", "running"]:
                break
            time.sleep(0.2)
        running = sorted(job for job, state in states.items() if state == "running")
        assert len(running) == 2, states
        pids = [_pid(data, job) for job in running]
        printed = _stop(server, signal.SIGINT)
        assert url in printed  # the URL it listened on was announced
        said = (
            f"stopping: 2 jobs keep running and will be re-adopted at the next start"
            f" ({', '.join(running)}); 1 pending job stays queued"
        )
        assert said in printed, printed
        # the truth: the jobs did keep running (their own session, not the service's)
        assert all(_alive(pid) for pid in pids)
        server, url, env = _start(data)
        # the restart says which it took back, and they are still running
        assert {_state(data, job, env) for job in running} == {"running"}
        printed = _stop(server, signal.SIGTERM)
        assert f"re-adopted 2 running jobs ({', '.join(running)})" in printed, printed
        assert "stopping: 2 jobs keep running" in printed, printed
        assert all(_alive(pid) for pid in pids)
    finally:
        if server.poll() is None:
            server.kill()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def test_clients_find_the_port_in_the_data_dir_and_errors_are_one_sentence(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    server, url, env = _start(data)  # --port 0: only the URL file knows which port
    try:
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
        assert run_ilucid("queue", "--data-dir", str(data), env=env).returncode == 0
        # a malformed request: the CLI prints the API's own detail sentence
        cli = run_ilucid("submit", "--data-dir", str(data), "--gpus", "-1", "--", "true", env=env)
        assert cli.returncode == 2
        # checked by the CLI before it is sent, in the service's own words
        assert cli.stderr.strip() == "ilucid: error: gpus: must be >= 0 (got -1)"
        token = (data / "admin.token").read_text().strip()
        api = httpx.post(
            url + "/jobs",
            json={"command": ["true"], "gpus": -1},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert api.status_code == 422
        body = api.json()
        assert cli.stderr.strip().endswith(body["detail"])
        assert body["errors"][0]["loc"] == ["body", "gpus"]  # the structure stays
        # --url and ILUCID_URL still win over the data directory
        elsewhere = {**env, "ILUCID_URL": "http://127.0.0.1:9"}
        refused = run_ilucid("nodes", "--data-dir", str(data), env=elsewhere)
        assert refused.returncode == 2 and "127.0.0.1:9" in refused.stderr
        given = run_ilucid("nodes", "--data-dir", str(data), "--url", url, env=elsewhere)
        assert given.returncode == 0, given.stderr
    finally:
        _stop(server, signal.SIGTERM)


def test_make_serve_passes_port() -> None:
    dry = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "serve", "PORT=8799"],
        capture_output=True,
        text=True,
        check=True,
    )
    (line,) = [x for x in dry.stdout.splitlines() if "ilucid serve" in x]
    assert " --port 8799 " in f"{line} "
    default = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "serve"], capture_output=True, text=True, check=True
    )
    assert "--port 8787" in default.stdout

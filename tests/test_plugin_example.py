"""The docs' plugin example, as a site installs it: a package in a fresh virtual environment.

``examples/deadline-plugin`` is pip-installed into a temporary venv (ilucid and its
dependencies come from this test's environment); its entry point (group
``ilucid.plugins``) is then found by name from a profile file, replayed with
``ilucid simulate`` and served with ``ilucid serve``, each in that venv.
"""

from __future__ import annotations

import csv
import shutil
import site
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from tests.service.serve_helpers import free_port

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "deadline-plugin"
# a cluster of 2 GPUs: "first" holds them until 1000 s; then "ml-a" (no deadline, the
# older) and "vision-b" (its tenant's jobs are due 3600 s after submission) both wait
TRACE = (
    "id,submit_time,num_gpus,duration,tenant\n"
    "first,0,2,1000,ml\n"
    "ml-a,10,2,100,ml\n"
    "vision-b,20,2,100,vision\n"
)


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plugin-venv")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (packages,) = (venv / "lib").glob("python3*/site-packages")
    # this checkout's ilucid first (a test may run it from src/), then its dependencies
    parents = [*(p for p in sys.path if p.endswith("/src")), *site.getsitepackages()]
    (packages / "ilucid_parent.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in parents)
    )
    source = root / "deadline-plugin"
    shutil.copytree(EXAMPLE, source)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--quiet", str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return python


def _ilucid(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "ilucid.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
    )


def test_the_plugin_is_listed_once_installed(venv_python: Path, tmp_path: Path) -> None:
    shutil.copy(EXAMPLE / "deadlines.toml", tmp_path)
    plain = _ilucid(venv_python, "simulate", "--help", cwd=tmp_path)
    assert plain.returncode == 0
    # the entry point is there in the venv, and nowhere in this test's own environment
    probe = (
        "from importlib import metadata;"
        "print([e.value for e in metadata.entry_points(group='ilucid.plugins')])"
    )
    found = subprocess.run(
        [str(venv_python), "-c", probe], capture_output=True, text=True, check=True
    )
    assert "deadline_first:DeadlineFirst" in found.stdout


def test_simulate_replays_the_installed_plugin(venv_python: Path, tmp_path: Path) -> None:
    shutil.copy(EXAMPLE / "deadlines.toml", tmp_path)
    (tmp_path / "trace.csv").write_text(TRACE)
    args = ["--trace", "trace.csv", "--nodes", "1", "--gpus-per-node", "2", "--out", "out"]
    done = _ilucid(venv_python, "simulate", *args, "--policy", "fifo,deadlines.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    starts = {}
    for policy in ("fifo", "deadlines"):
        with (tmp_path / "out" / f"jobs-{policy}.csv").open() as handle:
            starts[policy] = {r["job_id"]: float(r["first_start"]) for r in csv.DictReader(handle)}
    assert starts["fifo"]["ml-a"] < starts["fifo"]["vision-b"]  # submit order
    assert starts["deadlines"]["vision-b"] < starts["deadlines"]["ml-a"]  # its deadline first
    explained = _ilucid(
        venv_python,
        "simulate",
        *args,
        "--policy",
        "deadlines.toml",
        "--explain",
        "ml-a",
        "--out",
        "out2",
        cwd=tmp_path,
    )
    assert explained.returncode == 0, explained.stderr
    assert "no deadline: after every job with one" in explained.stdout


def test_serve_runs_the_installed_plugin(venv_python: Path, tmp_path: Path) -> None:
    shutil.copy(EXAMPLE / "deadlines.toml", tmp_path)
    port = free_port()
    command = [
        str(venv_python),
        "-m",
        "ilucid.cli",
        "serve",
        "--data-dir",
        "state",
        "--gpus",
        "2",
        "--port",
        str(port),
        "--interval",
        "0.2",
        "--policy",
        "deadlines.toml",
    ]
    process = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()[0]
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve did not come up"
            time.sleep(0.2)
        token = (tmp_path / "state" / "admin.token").read_text().strip()
        answer = httpx.get(f"{url}/policy", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["policy"] == "deadlines"
        assert "deadlines" in answer.json()["allowed"]
    finally:
        process.terminate()
        process.wait(timeout=20)

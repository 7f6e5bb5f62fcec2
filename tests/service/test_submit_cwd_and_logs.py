"""Issue 29, finding 2: a job runs where it was submitted, as with sbatch, and
``ilucid logs`` shows both of its streams.

A real ``ilucid serve`` runs in this process's directory; the CLI runs, as a user's
shell would, in another one (under ``job_scratch``, which the job's account can enter
when the tests run as root). ``ilucid submit`` sends the caller's directory as the
job's ``cwd``, or ``--cwd DIR`` (a relative DIR taken from the caller's directory);
``ilucid logs JOB`` prints stdout then stderr, each under a ``==> stream <==`` line,
and ``--stdout`` / ``--stderr`` pick one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import free_port, serving

#: reads a file by a relative path and prints where it ran
READS_RELATIVE = (
    "import os; print(open('ilucid-cwd-probe.txt').read().strip()); print('ran in', os.getcwd())"
)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, str]]:
    with serving(tmp_path / "data", free_port(), 2, dict(os.environ)) as env:
        yield env


def _ilucid_in(folder: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The ``ilucid`` command run from ``folder``, as a user's shell there would."""
    return subprocess.run(
        [sys.executable, "-m", "ilucid.cli", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def _submitted(folder: Path, *args: str, env: dict[str, str]) -> str:
    made = _ilucid_in(folder, "submit", "--gpus", "1", *args, env=env)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def _ended(job: str, env: dict[str, str]) -> dict[str, Any]:
    """The job as the API shows it once it has ended (60 s at most)."""
    headers = {"Authorization": f"Bearer {env['ILUCID_TOKEN']}"}
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=env["ILUCID_URL"], headers=headers, timeout=10) as client:
        while True:
            shown: dict[str, Any] = client.get(f"/jobs/{job}").raise_for_status().json()
            if shown["state"] in ("succeeded", "failed", "cancelled"):
                return shown
            if time.monotonic() > deadline:
                moves = shown.get("transitions", [])
                err = client.get(f"/jobs/{job}/logs", params={"stream": "stderr"}).text
                raise AssertionError(
                    f"{job} did not end within 60 s: {shown['state']} after"
                    f" {len(moves)} transitions, the last {moves[-3:]};"
                    f" stderr ends {err[-800:]!r}"
                )
            time.sleep(0.2)


def _stream(job: str, stream: str, env: dict[str, str]) -> str:
    """One stream of the job's output as the API serves it."""
    headers = {"Authorization": f"Bearer {env['ILUCID_TOKEN']}"}
    with httpx.Client(base_url=env["ILUCID_URL"], headers=headers, timeout=10) as client:
        answer = client.get(f"/jobs/{job}/logs", params={"stream": stream})
        return answer.raise_for_status().text


def _logs(folder: Path, job: str, *pick: str, env: dict[str, str]) -> str:
    shown = _ilucid_in(folder, "logs", job, *pick, env=env)
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


@pytest.fixture
def work(job_scratch: Path) -> Path:
    """A directory other than the service's, with a file the job reads by a relative path."""
    folder = job_scratch / "work"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    probe = folder / "ilucid-cwd-probe.txt"
    probe.write_text("read from the submission directory\n")
    probe.chmod(0o644)
    assert folder.resolve() != Path.cwd().resolve()
    return folder


def test_a_job_runs_in_the_directory_it_was_submitted_from(
    served: dict[str, str], work: Path
) -> None:
    job = _submitted(work, "--", "python3", "-c", READS_RELATIVE, env=served)
    shown = _ended(job, served)
    out, err = _stream(job, "stdout", served), _stream(job, "stderr", served)
    assert shown["state"] == "succeeded", (shown, out, err)
    assert out == f"read from the submission directory\nran in {work.resolve()}\n", err


def test_cwd_takes_a_directory_relative_to_the_caller(served: dict[str, str], work: Path) -> None:
    caller = work.parent  # submits from job_scratch: ``--cwd work`` is its subdirectory
    job = _submitted(caller, "--cwd", "work", "--", "python3", "-c", READS_RELATIVE, env=served)
    shown = _ended(job, served)
    out, err = _stream(job, "stdout", served), _stream(job, "stderr", served)
    assert shown["state"] == "succeeded", (shown, out, err)
    assert out == f"read from the submission directory\nran in {work.resolve()}\n", err
    # an absolute --cwd is taken as it is, from anywhere
    where = "import os; print(os.getcwd())"
    job = _submitted(work, "--cwd", str(caller), "--", "python3", "-c", where, env=served)
    assert _ended(job, served)["state"] == "succeeded"
    assert _stream(job, "stdout", served) == f"{caller.resolve()}\n"


def test_logs_shows_both_streams_labelled_and_each_alone_on_request(
    served: dict[str, str], work: Path
) -> None:
    both = "import sys; print('to stdout'); print('to stderr', file=sys.stderr)"
    job = _submitted(work, "--", "python3", "-c", both, env=served)
    assert _ended(job, served)["state"] == "succeeded"
    shown = _logs(work, job, env=served)
    assert shown == "==> stdout <==\nto stdout\n==> stderr <==\nto stderr\n", shown
    assert _logs(work, job, "--stdout", env=served) == "to stdout\n"
    assert _logs(work, job, "--stderr", env=served) == "to stderr\n"
    # an empty stream keeps its label and says it is empty; a last line without its
    # newline still ends before the next label
    quiet = "import sys; sys.stderr.write('no newline')"
    job = _submitted(work, "--", "python3", "-c", quiet, env=served)
    assert _ended(job, served)["state"] == "succeeded"
    shown = _logs(work, job, env=served)
    assert shown == "==> stdout <==\n(empty)\n==> stderr <==\nno newline\n", shown
    both_picked = _ilucid_in(work, "logs", job, "--stdout", "--stderr", env=served)
    assert both_picked.returncode != 0 and "not allowed with" in both_picked.stderr

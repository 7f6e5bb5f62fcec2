"""The client commands against a real ``ilucid serve``, run from another directory as a
new user would (issue 34, points 4 and 9).

One service on a port in 88xx, started in its own folder with HOME and XDG_CONFIG_HOME
pointed at temporary folders; every command runs from a different folder, relative
paths only, with neither ILUCID_URL nor ILUCID_TOKEN unless a test sets them.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import ilucid

SRC = str(Path(ilucid.__file__).resolve().parents[1])


def _port_in_88xx() -> int:
    for port in range(8800, 8900):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 8800-8899")


def _folder(prefix: str) -> Path:
    """A folder the service's jobs may enter (run as root, they run as other users)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    return folder


def _env(home: Path, config: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ILUCID_URL", "ILUCID_TOKEN", "PYTHONPATH", "XDG_CONFIG_HOME", "HOME")
    }
    return {**env, "PYTHONPATH": SRC, "HOME": str(home), "XDG_CONFIG_HOME": str(config), **extra}


@dataclass
class Site:
    port: int
    served_in: Path  # where `ilucid serve` ran: its ./.ilucid
    home: Path
    config: Path  # XDG_CONFIG_HOME

    def ilucid(
        self, *argv: str, cwd: Path, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ilucid.cli", *argv],
            cwd=cwd,
            env=env or _env(self.home, self.config),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def admin(self, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """A command with the URL and the admin token in the environment (the tests of
        what the service answers, not of how the CLI finds it)."""
        url = f"http://127.0.0.1:{self.port}"
        env = _env(self.home, self.config, ILUCID_URL=url, ILUCID_TOKEN=self.token)
        return self.ilucid(*argv, cwd=cwd, env=env)

    @property
    def token(self) -> str:
        return (self.served_in / ".ilucid" / "admin.token").read_text().strip()


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    root = _folder("ilucid-firstday-")
    served_in, home, config = root / "checkout", root / "home", root / "home" / "cfg"
    for folder in (served_in, home):
        folder.mkdir()
        folder.chmod(0o755)
    port = _port_in_88xx()
    serve = ["serve", "--port", str(port), "--gpus", "1", "--interval", "0.2"]
    process = subprocess.Popen(
        [sys.executable, "-m", "ilucid.cli", *serve],
        cwd=served_in,
        env=_env(home, config),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (served_in / ".ilucid" / "url").exists():
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "the service did not start"
            time.sleep(0.2)
        time.sleep(0.5)  # the client settings are written just after the URL file
        yield Site(port, served_in, home, config)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(root, ignore_errors=True)


# -- point 4: found from any directory ------------------------------------------------


def test_serve_writes_the_url_and_the_token_file_not_the_token(site: Site) -> None:
    written = site.config / "ilucid" / "client.toml"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    text = written.read_text()
    assert f'url = "http://127.0.0.1:{site.port}"' in text
    assert str(site.served_in / ".ilucid" / "admin.token") in text
    assert site.token not in text


def test_client_commands_find_the_service_from_another_directory(site: Site) -> None:
    elsewhere = _folder("ilucid-elsewhere-")
    result = site.ilucid("jobs", cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:2] == ["ID", "USER"]


def test_no_token_names_every_place_tried_and_each_fix(site: Site) -> None:
    fresh = _folder("ilucid-newuser-")
    result = site.ilucid("jobs", cwd=fresh, env=_env(fresh, fresh / "cfg"))
    assert result.returncode == 2
    error = result.stderr
    assert error.startswith("ilucid: error: no token: tried --token, ILUCID_TOKEN")
    assert str(fresh / ".ilucid" / "admin.token") in error
    for fix in ("--data-dir", "ILUCID_URL", "ILUCID_TOKEN", str(fresh / "cfg/ilucid/client.toml")):
        assert fix in error, fix
    assert len(error.strip().splitlines()) == 1


def test_unreachable_service_says_where_the_url_came_from(site: Site) -> None:
    fresh = _folder("ilucid-stale-")
    stale = fresh / "cfg" / "ilucid"
    stale.mkdir(parents=True)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    (stale / "client.toml").write_text(f'url = "http://127.0.0.1:{dead}"\n')
    env = _env(fresh, fresh / "cfg", ILUCID_TOKEN="x")
    result = site.ilucid("jobs", cwd=fresh, env=env)
    assert result.returncode == 2
    error = result.stderr
    assert f"cannot reach the service at http://127.0.0.1:{dead}" in error
    assert f"the URL came from {stale / 'client.toml'}" in error
    for fix in ("--url", "ILUCID_URL", "--data-dir"):
        assert fix in error, fix


# -- point 9 ------------------------------------------------------------------------


def test_admin_is_told_no_job_not_no_job_of_yours(site: Site) -> None:
    result = site.admin("explain", "j999999", cwd=_folder("ilucid-admin-"))
    assert result.returncode == 2
    assert "404: no job j999999" in result.stderr
    assert "of yours" not in result.stderr


def test_too_many_gpus_is_refused_in_the_field_form(site: Site) -> None:
    result = site.admin("submit", "--gpus", "5", "--", "true", cwd=_folder("ilucid-gpus-"))
    assert result.returncode == 2
    assert "gpus: must be between 0 and 1" in result.stderr, result.stderr


def test_model_show_prints_the_served_model(site: Site) -> None:
    result = site.admin("model", "show", cwd=_folder("ilucid-model-"))
    assert result.returncode == 0, result.stderr
    answer = httpx.get(
        f"http://127.0.0.1:{site.port}/model",
        headers={"Authorization": f"Bearer {site.token}"},
    ).json()
    assert answer["version"] == 0  # a new service: nothing fitted yet
    lines = result.stdout.splitlines()
    assert lines[0].startswith(
        f"duration model: none fitted yet ({answer['finished_jobs']} of the"
        f" {answer['min_jobs']} finished jobs the first fit needs)"
    )
    assert f"refits: every {answer['refit_every']} finished jobs" in result.stdout


def test_queue_shows_why_each_job_waits(site: Site) -> None:
    here = _folder("ilucid-queue-")
    holds = site.admin("submit", "--gpus", "1", "--estimate", "60", "--", "sleep", "30", cwd=here)
    waits = site.admin("submit", "--gpus", "1", "--estimate", "60", "--", "true", cwd=here)
    assert holds.returncode == 0 and waits.returncode == 0, holds.stderr + waits.stderr
    waiting = waits.stdout.strip()
    deadline = time.monotonic() + 30
    while True:
        result = site.admin("queue", cwd=here)
        assert result.returncode == 0, result.stderr
        rows = [line for line in result.stdout.splitlines() if waiting in line]
        if rows and not rows[0].rstrip().endswith("-"):
            break
        assert time.monotonic() < deadline, result.stdout
        time.sleep(0.5)
    header = result.stdout.splitlines()[0]
    assert header.split() == ["POS", "ID", "EXPECTED", "START", "WHY", "IT", "WAITS"]
    reason = rows[0][header.index("WHY IT WAITS") :]
    queued = httpx.get(
        f"http://127.0.0.1:{site.port}/queue",
        headers={"Authorization": f"Bearer {site.token}"},
    ).json()
    full = next(r["reason"] for r in queued if r["id"] == waiting)
    # the API's reason, without the position the table shows in its own column
    assert reason.strip().rstrip(".")[:40] in full
    assert "position" not in reason
    site.admin("cancel", holds.stdout.strip(), cwd=here)
    site.admin("cancel", waiting, cwd=here)


def test_jobs_shows_each_name_and_a_share_as_its_fraction(site: Site) -> None:
    """Point 7: ``--name`` was shown nowhere, and a half-GPU job listed as 1 GPU."""
    here = _folder("ilucid-names-")
    named = site.admin(
        "submit",
        "--gpus",
        "1",
        "--gpu-milli",
        "500",
        "--name",
        "resnet-half",
        "--",
        "true",
        cwd=here,
    )
    assert named.returncode == 0, named.stderr
    job = named.stdout.strip()
    result = site.admin("jobs", cwd=here)
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split()[:4] == ["ID", "USER", "CLASS", "GPUS"]
    assert header.split()[-1] == "NAME"
    (row,) = [line for line in rows if line.startswith(job)]
    assert row.split()[1:4] == ["admin", "training", "0.5"], row
    assert row.split()[-1] == "resnet-half", row

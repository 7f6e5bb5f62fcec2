"""Jobs never run with the service's privileges (issue 16).

A real ``ilucid serve`` runs as root (as in CI). Alice's token maps to a Unix
account of her own; Bob's maps to none, so his jobs run as a dynamic uid of his own. Alice's
job tries to read the admin token, the database and Bob's job output: every
read fails with "Permission denied", and her job ran as her account. The data
directory and its secrets are private, the admin token never reaches the
service's log, and a revoked token is refused at once.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from unix_accounts import ensure_account

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import free_port, run_ilucid, serve_command

ALICE = "ilucid-alice"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="switching users needs root (CI runs as root)"
)


@pytest.fixture(scope="module")
def alice_account() -> str:
    """A real, unprivileged Unix account for Alice (created once per machine)."""
    return ensure_account(ALICE)


@pytest.fixture
def site(tmp_path: Path, alice_account: str) -> Iterator[dict[str, object]]:
    data = tmp_path / "data"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "ILUCID_URL": url}
    log = tmp_path / "serve.log"
    with log.open("wb") as output:
        server = subprocess.Popen(
            serve_command(data, port, 2, 0.1, "--policy", "tiered"),
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise AssertionError(f"serve did not come up: {log.read_text()}")
        tokens = {}
        for user, unix in (("alice", alice_account), ("bob", None)):
            extra = ("--unix-user", unix) if unix else ()
            made = run_ilucid(
                "token", "create", "--user", user, "--tenant", "lab",
                "--data-dir", str(data), *extra, env=env,
            )  # fmt: skip
            assert made.returncode == 0, made.stderr
            tokens[user] = made.stdout.strip()
        yield {"url": url, "data": data, "tokens": tokens, "log": log}
    finally:
        server.terminate()
        server.wait(timeout=15)


def _as(site: dict[str, object], user: str) -> dict[str, str]:
    tokens = site["tokens"]
    assert isinstance(tokens, dict)
    return {"Authorization": f"Bearer {tokens[user]}"}


def _run(site: dict[str, object], user: str, command: list[str]) -> str:
    """Submit as ``user``; wait for the job to end; its id."""
    url = str(site["url"])
    answer = httpx.post(
        f"{url}/jobs", json={"command": command, "gpus": 0}, headers=_as(site, user), timeout=10
    )
    assert answer.status_code == 201, answer.text
    job_id = str(answer.json()["id"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = httpx.get(f"{url}/jobs/{job_id}", headers=_as(site, user), timeout=10).json()
        if state["state"] in ("succeeded", "failed"):
            return job_id
        time.sleep(0.2)
    raise AssertionError(f"{job_id} did not end: {state}")


def _logs(site: dict[str, object], user: str, job_id: str, stream: str) -> str:
    url = str(site["url"])
    answer = httpx.get(
        f"{url}/jobs/{job_id}/logs", params={"stream": stream}, headers=_as(site, user), timeout=10
    )
    assert answer.status_code == 200, answer.text
    return answer.text


def test_a_job_reads_no_secret_and_runs_as_its_owner(site: dict[str, object]) -> None:
    data = Path(str(site["data"]))
    admin_token = (data / "admin.token").read_text().strip()
    bob = _run(site, "bob", ["sh", "-c", "id -u; echo bob-private-output"])
    bob_uid, bob_output = _logs(site, "bob", bob, "stdout").split()
    assert 61184 <= int(bob_uid) <= 65519, "bob has no account: a dynamic uid of his own"
    assert bob_output == "bob-private-output"

    targets = [data / "admin.token", data / "ilucid.db", data / "jobs" / bob / "stdout.log"]
    script = "id -un; " + "; ".join(f"cat '{t}'" for t in targets)
    alice = _run(site, "alice", ["sh", "-c", script])
    out, err = _logs(site, "alice", alice, "stdout"), _logs(site, "alice", alice, "stderr")
    assert out.split() == [ALICE], f"alice's job read something: {out!r}"
    assert err.count("Permission denied") == len(targets), err
    for secret in (admin_token, "bob-private-output", "SQLite format"):
        assert secret not in out + err

    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    for private in ("ilucid.db", "admin.token"):
        assert stat.S_IMODE((data / private).stat().st_mode) == 0o600, private
    assert admin_token not in Path(str(site["log"])).read_text()


def test_a_job_gets_no_secret_from_the_environment(site: dict[str, object]) -> None:
    job = _run(site, "bob", ["sh", "-c", "env"])
    names = {line.split("=", 1)[0] for line in _logs(site, "bob", job, "stdout").splitlines()}
    assert "ILUCID_URL" not in names and "ILUCID_JOB_ID" in names
    assert {"HOME", "USER"} <= names


def test_a_revoked_token_is_refused_at_once(site: dict[str, object]) -> None:
    url = str(site["url"])
    assert httpx.get(f"{url}/jobs", headers=_as(site, "bob"), timeout=10).status_code == 200
    revoked = run_ilucid(
        "token", "revoke", "--user", "bob", "--data-dir", str(site["data"]), env=dict(os.environ)
    )
    assert revoked.returncode == 0, revoked.stderr
    assert httpx.get(f"{url}/jobs", headers=_as(site, "bob"), timeout=10).status_code == 401


def test_an_unknown_or_root_unix_user_is_refused(tmp_path: Path) -> None:
    for name, why in (("root", "never run as root"), ("no-such-user-x", "no such account")):
        made = run_ilucid(
            "token", "create", "--user", "u", "--tenant", "t", "--unix-user", name,
            "--data-dir", str(tmp_path), env=dict(os.environ),
        )  # fmt: skip
        assert made.returncode == 2 and why in made.stderr, made.stderr

"""Issue 34: Slurm jobs run as their users.

A service run as root submits each job as its token's Unix account (``sbatch
--uid/--gid``), with its output in a spool folder that account owns, and refuses a job
without an account (never root). The first tests check what ilucid asks of Slurm
without a cluster: ``sbatch`` and ``scontrol`` are small scripts on ``PATH`` that
record their arguments and environment. The last ones run on the real Slurm test
cluster (see conftest): the job's ``id -u`` is the mapped account's.
"""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm_harness import SlurmCluster, slurm_job, wait_for

from ilucid.backends.base import ProcessState
from ilucid.backends.slurm import SlurmBackend
from ilucid.backends.slurm_parse import parse_jobs
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService

pytestmark = pytest.mark.xdist_group("slurm")

RECORDER = """#!/bin/sh
# records one call: its arguments, one a line, then its environment
{{ printf '%s\\n' "$0" "$@"; echo --env--; env; echo --end--; }} >> "{calls}"
case "$0" in *sbatch) echo "4242";; esac
"""


def fake_slurm(folder: Path) -> Path:
    """``sbatch`` and ``scontrol`` that record each call into ``calls`` (sbatch: job 4242)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    calls = folder / "calls"
    for name in ("sbatch", "scontrol"):
        script = bin_dir / name
        script.write_text(RECORDER.format(calls=calls))
        script.chmod(0o755)
    return calls


def recorded(calls: Path) -> list[tuple[list[str], dict[str, str]]]:
    """Each call: its argv (the command's name first) and its environment."""
    found = []
    for block in calls.read_text().split("--end--\n"):
        if not block.strip():
            continue
        argv_text, _, env_text = block.partition("--env--\n")
        argv = argv_text.splitlines()
        argv[0] = Path(argv[0]).name
        env = dict(line.split("=", 1) for line in env_text.splitlines() if "=" in line)
        found.append((argv, env))
    return found


@pytest.fixture
def recorded_slurm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, pytest.MonkeyPatch]:
    calls = fake_slurm(tmp_path)
    monkeypatch.setenv("PATH", f"{calls.parent / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("ILUCID_TOKEN", "the-services-own-secret")
    return calls, monkeypatch


def test_as_root_sbatch_gets_the_accounts_uid_and_gid_and_a_spool_folder_it_owns(
    recorded_slurm: tuple[Path, pytest.MonkeyPatch], slurm_account: str, slurm_data: Path
) -> None:
    calls, _ = recorded_slurm
    account = pwd.getpwnam(slurm_account)
    (slurm_data / "ilucid.db").write_text("the database")
    (slurm_data / "ilucid.db").chmod(0o644)  # as a careless copy would leave it
    backend = SlurmBackend(slurm_data)
    backend.enqueue("j000001", ["sh", "-c", "id -u"], 1, run_as=slurm_account)
    [(sbatch, env), (scontrol, _)] = recorded(calls)
    assert sbatch[0] == "sbatch"
    assert f"--uid={account.pw_uid}" in sbatch and f"--gid={account.pw_gid}" in sbatch
    folder = slurm_data / "spool" / "slurm" / slurm_account
    assert f"--output={folder / 'j000001.stdout.log'}" in sbatch
    assert f"--error={folder / 'j000001.stderr.log'}" in sbatch
    assert str(folder / "j000001.exit") in sbatch  # the batch script's exit file
    assert "--chdir=/" in sbatch or f"--chdir={account.pw_dir}" in sbatch  # never ours
    # the job's environment (sbatch --export=ALL) is the account's, with no secret
    assert "ILUCID_TOKEN" not in env and env["USER"] == slurm_account
    assert env["HOME"] == account.pw_dir
    # held as the administrator: the account cannot release its own job past ilucid
    assert scontrol == ["scontrol", "hold", "4242"]
    # the spool folder is the account's alone; above it, root's and traverse-only
    info = folder.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (
        account.pw_uid,
        account.pw_gid,
        0o700,
    )
    for above in (folder.parent, folder.parent.parent, slurm_data):
        assert (above.stat().st_uid, stat.S_IMODE(above.stat().st_mode)) == (0, 0o711), above
    assert stat.S_IMODE((slurm_data / "ilucid.db").stat().st_mode) == 0o600
    assert stat.S_IMODE((slurm_data / "slurm").stat().st_mode) & 0o077 == 0


def test_a_service_that_is_not_root_submits_as_itself_without_uid_or_gid(
    recorded_slurm: tuple[Path, pytest.MonkeyPatch], slurm_data: Path
) -> None:
    calls, _ = recorded_slurm
    backend = SlurmBackend(slurm_data)
    backend.switches_users = False  # as it is where the service is not root
    assert "own account" in backend.describe_identity()
    backend.enqueue("j000002", ["true"], 1, run_as="nobody")
    [(sbatch, env)] = recorded(calls)
    assert not any(arg.startswith(("--uid", "--gid")) for arg in sbatch)
    assert f"--output={slurm_data.resolve() / 'slurm' / 'j000002' / 'stdout.log'}" in sbatch
    assert env["ILUCID_TOKEN"] == "the-services-own-secret"  # its own jobs, as before


@pytest.mark.parametrize(
    ("run_as", "said"), [(None, "--unix-user ACCOUNT"), ("#61190", "dynamic uid")]
)
def test_as_root_a_job_without_an_account_is_refused_and_never_submitted(
    recorded_slurm: tuple[Path, pytest.MonkeyPatch],
    slurm_data: Path,
    slurm_account: str,
    run_as: str | None,
    said: str,
) -> None:
    calls, _ = recorded_slurm
    backend = SlurmBackend(slurm_data)
    with pytest.raises(ValueError, match="run_as") as refused:
        backend.check(["true"], None, run_as)
    assert said in str(refused.value)
    with pytest.raises(ValueError, match="run_as"):
        backend.enqueue("j000003", ["true"], 1, run_as=run_as)
    assert not calls.exists(), "nothing reached Slurm"
    backend.check(["true"], None, slurm_account)  # a mapped account may submit


def test_logs_read_only_the_accounts_own_regular_files(
    recorded_slurm: tuple[Path, pytest.MonkeyPatch], slurm_account: str, slurm_data: Path
) -> None:
    """The service reads a job's spool files as root: a link to the admin token, or a
    file the account does not own, shows nothing."""
    account = pwd.getpwnam(slurm_account)
    backend = SlurmBackend(slurm_data)
    backend.enqueue("j000004", ["true"], 1, run_as=slurm_account)
    secret = slurm_data / "admin.token"
    secret.write_text("admin-secret\n")
    folder = slurm_data / "spool" / "slurm" / slurm_account
    out = folder / "j000004.stdout.log"
    out.symlink_to(secret)
    assert backend.logs("j000004") == ""
    out.unlink()
    out.write_text("root's own file\n")  # as root: not the account's
    assert backend.logs("j000004") == ""
    os.chown(out, account.pw_uid, account.pw_gid)
    assert backend.logs("j000004") == "root's own file\n"
    # a restarted service finds the files again from its own record
    assert SlurmBackend(slurm_data).logs("j000004") == "root's own file\n"


def test_the_data_directory_stays_traverse_only_once_it_holds_the_spool(
    slurm_data: Path,
) -> None:
    """``ilucid serve`` and ``ilucid token`` make the data directory private at start:
    once the spool is there, 0711 (running jobs still reach their folders), else 0700."""
    from ilucid.cli.serve.host import private_data_dir

    data = slurm_data / "data"
    umask = os.umask(0o022)
    try:
        private_data_dir(data)
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        (data / "spool").mkdir()
        private_data_dir(data)
        assert stat.S_IMODE(data.stat().st_mode) == 0o711
    finally:
        os.umask(umask)


# -- on the real Slurm test cluster -----------------------------------------------------------


def until_ended(
    service: SchedulerService, client: TestClient, job_id: str, headers: dict[str, str]
) -> str:
    deadline = time.monotonic() + 90
    state = ""
    while time.monotonic() < deadline:
        service.reconcile()
        state = str(client.get(f"/jobs/{job_id}", headers=headers).json()["state"])
        if state in ("succeeded", "failed", "cancelled"):
            return state
        time.sleep(0.3)
    raise AssertionError(f"{job_id} did not end: {state}")


def test_a_job_runs_on_slurm_as_its_tokens_account_with_its_output_in_that_accounts_spool(
    slurm_cluster: SlurmCluster,
    slurm_account: str,
    slurm_data: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    account = pwd.getpwnam(slurm_account)
    monkeypatch.setenv("ILUCID_TOKEN", "the-services-own-secret")
    url = f"sqlite:///{slurm_data / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    backend = SlurmBackend(slurm_data, slurm_conf=slurm_cluster.conf)
    service = SchedulerService(engine, backend, policy="fifo")
    client = TestClient(build_app(service))
    alice = {
        "Authorization": f"Bearer {create_token(engine, 'alice', 'lab', False, slurm_account)}"
    }
    bob = {"Authorization": f"Bearer {create_token(engine, 'bob', 'lab')}"}
    try:
        refused = client.post("/jobs", json={"command": ["true"], "gpus": 1}, headers=bob)
        assert refused.status_code == 403, refused.text
        assert "this token has no Unix account" in refused.text
        assert "--unix-user" in refused.text
        probe = (
            'id -u; id -g; echo "ILUCID_PROGRESS step=3 total=10";'
            f" cat {slurm_data}/ilucid.db > /dev/null 2>&1 && echo read-db || echo no-db;"
            f" ls {slurm_data} > /dev/null 2>&1 && echo listed || echo no-list;"
            ' echo "secret=${ILUCID_TOKEN:-none}"'
        )
        made = client.post("/jobs", json={"command": ["sh", "-c", probe], "gpus": 1}, headers=alice)
        assert made.status_code == 201, made.text
        job_id = str(made.json()["id"])
        assert until_ended(service, client, job_id, alice) == "succeeded"
        output = slurm_data / "spool" / "slurm" / slurm_account / f"{job_id}.stdout.log"
        lines = output.read_text().splitlines()
        assert lines[:2] == [str(account.pw_uid), str(account.pw_gid)], lines
        assert lines[2:] == [
            "ILUCID_PROGRESS step=3 total=10",
            "no-db",
            "no-list",
            "secret=none",
        ], lines
        assert output.stat().st_uid == account.pw_uid
        assert output.parent.stat().st_uid == account.pw_uid
        assert stat.S_IMODE(output.parent.stat().st_mode) == 0o700
        # the service shows its logs from there
        shown = client.get(f"/jobs/{job_id}/logs", headers=alice)
        assert shown.status_code == 200 and str(account.pw_uid) in shown.text, shown.text
    finally:
        engine.dispose()


def test_a_job_of_another_account_is_preempted_held_past_its_reach_and_cancelled(
    slurm_cluster: SlurmCluster, slurm_account: str, slurm_data: Path, job_scratch: Path
) -> None:
    """Root requeues, holds and cancels a job submitted with --uid; the account cannot
    release it past ilucid; its progress is read from its spool output."""
    account = pwd.getpwnam(slurm_account)
    backend = SlurmBackend(slurm_data, slurm_conf=slurm_cluster.conf)
    runs = job_scratch / "runs"
    command = [
        "sh",
        "-c",
        f'echo "$(id -u)" >> {runs}; echo "ILUCID_PROGRESS step=4 total=8"; sleep 120',
    ]
    backend.enqueue("u000001", command, 1, run_as=slurm_account)
    backend.observe()
    [slurm_id] = [j.job_id for j in backend._jobs["u000001"]]
    try:
        job = slurm_job(slurm_cluster, slurm_id)
        assert (job["user_id"], job["state_reason"]) == (account.pw_uid, "JobHeldAdmin"), job
        backend.start("u000001", command, 1)
        running = wait_for(backend, "u000001", ProcessState.RUNNING)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            not runs.exists() or backend.observe().jobs["u000001"].progress is None
        ):
            time.sleep(0.5)
        assert runs.read_text().split() == [str(account.pw_uid)], running
        assert backend.observe().jobs["u000001"].progress == (4.0, 8.0)

        backend.stop("u000001")  # preempt: requeued, held by the administrator
        wait_for(backend, "u000001", ProcessState.HELD)
        assert slurm_job(slurm_cluster, slurm_id)["state_reason"] == "JobHeldAdmin"
        released = subprocess.run(
            ["runuser", "-u", slurm_account, "--", "scontrol", "release", str(slurm_id)],
            env=slurm_cluster.env(),
            capture_output=True,
            text=True,
            check=False,
        )
        assert released.returncode != 0, "the account released its own job past ilucid"
        time.sleep(2)
        assert backend.observe().jobs["u000001"].state is ProcessState.HELD

        backend.cancel("u000001")  # scancel, as root, of the account's job
        ended = wait_for(backend, "u000001", ProcessState.EXITED)
        assert [
            j.state for j in parse_jobs(json.loads(slurm_cluster.squeue())) if j.job_id == slurm_id
        ] == ["CANCELLED"], ended
    finally:
        subprocess.run(["scancel", str(slurm_id)], env=slurm_cluster.env(), check=False)


def test_a_job_named_as_ilucids_but_run_by_another_account_is_not_taken_for_it(
    slurm_cluster: SlurmCluster,
    slurm_account: str,
    slurm_data: Path,
    job_scratch: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Any Slurm user may name a job ``ilucid-<tag>-<id>``: ilucid takes a job for its own
    only when it runs as the account ilucid submitted that id for (here root, for an id
    it never submitted), and says once that it ignored one."""
    backend = SlurmBackend(slurm_data, slurm_conf=slurm_cluster.conf)
    backend.enqueue("u000001", ["sleep", "60"], 1, run_as=slurm_account)
    forged = subprocess.run(
        [
            *("runuser", "-u", slurm_account, "--", "sbatch", "--parsable", "--hold"),
            *(f"--job-name={backend.prefix}u000002", "--wrap", "sleep 60"),
        ],
        env=slurm_cluster.env(),
        cwd=job_scratch,
        capture_output=True,
        text=True,
        check=False,
    )
    assert forged.returncode == 0, forged.stderr
    impostor = int(forged.stdout.strip().split(";")[0])
    try:
        with caplog.at_level("WARNING", logger="ilucid.backends.slurm"):
            observed = backend.observe()
            backend.observe()
        assert "u000001" in observed.jobs  # its own job, run as its account: ilucid's
        assert "u000002" not in observed.jobs
        said = [r.getMessage() for r in caplog.records if str(impostor) in r.getMessage()]
        assert len(said) == 1 and f"runs as {slurm_account}" in said[0], said
    finally:
        subprocess.run(["scancel", str(impostor)], env=slurm_cluster.env(), check=False)
        backend.cancel("u000001")

"""``ilucid serve`` as a user starts it, driven by the ``ilucid`` client commands."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import free_port, run_ilucid, serve_command


@pytest.fixture
def served(tmp_path: Path):  # type: ignore[no-untyped-def]
    port = free_port()
    data = tmp_path / "data"
    server = subprocess.Popen(
        serve_command(data, port, 2, 0.2),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    env = {**os.environ, "ILUCID_URL": f"http://127.0.0.1:{port}"}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if run_ilucid("nodes", "--data-dir", str(data), env=env).returncode == 0:
            break
        time.sleep(0.3)
    else:
        server.kill()
        raise AssertionError(f"serve did not come up: {server.communicate()[0]}")
    yield data, env
    server.terminate()
    printed = server.communicate(timeout=10)[0]
    # the quick start's promise: the dashboard URL, and where the admin token is; the
    # token itself never goes to the log (issue 16)
    token = (data / "admin.token").read_text().strip()
    assert f"dashboard: http://127.0.0.1:{port}/" in printed, printed
    assert str(data / "admin.token") in printed and token not in printed, printed


def test_submit_queue_explain_logs_and_cancel_through_the_cli(served) -> None:  # type: ignore[no-untyped-def]
    data, env = served
    common = ("--data-dir", str(data))
    long = run_ilucid(
        "submit", *common, "--gpus", "2", "--estimate", "600", "--", "sleep", "30", env=env
    ).stdout.strip()
    short = run_ilucid(
        "submit", *common, "--gpus", "1", "--", "sh", "-c", "echo hi $CUDA_VISIBLE_DEVICES", env=env
    ).stdout.strip()
    time.sleep(1.0)
    jobs = run_ilucid("jobs", *common, env=env).stdout
    lines = jobs.splitlines()
    assert lines[0].split() == [
        "ID",
        "USER",
        "CLASS",
        "GPUS",
        "STATE",
        "ON",
        "GPUS",
        "PROGRESS",
        "COMMAND",
        "NAME",
    ]
    assert set(lines[1]) == {"-"}  # the rule under the header (plain text when piped)
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert rows[long][1:5] == ["admin", "training", "2", "running"]
    queue = run_ilucid("queue", *common, env=env).stdout
    assert short in queue and "in " in queue  # expected start shown
    why = run_ilucid("explain", short, *common, env=env).stdout
    assert "pending (position 1 in ilucid order)" in why
    assert run_ilucid("cancel", long, *common, env=env).stdout.strip() == f"{long}: stopping"
    deadline = time.monotonic() + 20
    while (
        time.monotonic() < deadline
        and "succeeded" not in run_ilucid("jobs", *common, env=env).stdout
    ):
        time.sleep(0.3)
    assert run_ilucid("logs", short, "--stdout", *common, env=env).stdout.startswith("hi ")
    final = run_ilucid("jobs", *common, env=env).stdout
    assert "cancelled" in final and "succeeded" in final
    bad = run_ilucid("explain", "j999999", *common, env=env)
    assert bad.returncode == 2 and "404: no job j999999" in bad.stderr


def test_submit_without_a_command_is_a_clear_error(served) -> None:  # type: ignore[no-untyped-def]
    data, env = served
    result = run_ilucid("submit", "--data-dir", str(data), env=env)
    assert result.returncode == 2 and "give the command after --" in result.stderr


def test_whatif_replays_the_history_under_a_list_of_policies(served) -> None:  # type: ignore[no-untyped-def]
    data, env = served
    common = ("--data-dir", str(data))
    jobs = [
        run_ilucid("submit", *common, "--gpus", "1", "--", "sleep", "0.2", env=env).stdout.strip()
        for _ in range(3)
    ]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        listed = run_ilucid("jobs", *common, env=env).stdout
        if listed.count("succeeded") == len(jobs):
            break
        time.sleep(0.3)
    result = run_ilucid("whatif", *common, "--policy", "fifo,sjf", env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"what-if: {len(jobs)} recorded jobs replayed on 1 node(s)"
    assert lines[1].split()[:2] == ["policy", "jobs"]
    # the service's own policy first, then each one asked for, one row each
    assert [line.split()[0] for line in lines[3:]] == ["ilucid", "fifo", "sjf"]
    assert all(line.split()[1] == str(len(jobs)) for line in lines[3:])


def test_whatif_replays_on_a_dask_cluster_as_tasks(served) -> None:  # type: ignore[no-untyped-def]
    """``--scheduler`` runs each policy's replay as a task on that cluster's workers (a
    separate process here), with the same figures as the local replay."""
    from distributed import LocalCluster

    data, env = served
    common = ("--data-dir", str(data))
    for _ in range(2):
        run_ilucid("submit", *common, "--gpus", "1", "--", "sleep", "0.2", env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if run_ilucid("jobs", *common, env=env).stdout.count("succeeded") == 2:
            break
        time.sleep(0.3)
    local = run_ilucid("whatif", *common, "--policy", "fifo,sjf", env=env)
    assert local.returncode == 0, local.stderr
    with LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        address = cluster.scheduler_address
        remote = run_ilucid(
            "whatif", *common, "--policy", "fifo,sjf", "--scheduler", address, env=env
        )
        assert remote.returncode == 0, remote.stderr
        # the scheduler saw the replays as tasks (keys are prefixed by the function)
        assert "replay_policy" in cluster.scheduler.task_prefixes
    # the wall-time column aside, the figures are the local replay's
    assert [line.rsplit(None, 1)[0] for line in remote.stdout.splitlines()] == [
        line.rsplit(None, 1)[0] for line in local.stdout.splitlines()
    ]

"""Issue 7: ilucid on a real Slurm 22.05 (one node, 4 a100 + 4 v100 GPUs; see conftest).

``ilucid serve --backend slurm`` runs as a process and jobs are submitted with
the CLI, as a user would. Each job appends ``start <time> <CUDA_VISIBLE_DEVICES>
<SLURM_JOB_ID>`` (and ``end``) to its own file, so the test sees what Slurm
really ran, where, and when, and compares it with the decisions ilucid stored.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.service.db import DecisionRow, make_engine

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import free_port, run_ilucid
from slurm_harness import SlurmCluster

pytestmark = pytest.mark.xdist_group("slurm")

JOB = (
    'echo "start $(date +%s.%N) $CUDA_VISIBLE_DEVICES $SLURM_JOB_ID" >> "$OUT/$ILUCID_JOB_ID";'
    ' trap \'echo "end $(date +%s.%N)" >> "$OUT/$ILUCID_JOB_ID"; exit 143\' TERM;'
    ' sleep {seconds} & wait; echo "end $(date +%s.%N)" >> "$OUT/$ILUCID_JOB_ID"'
)
#: Slurm's reason while ilucid holds a job: run as root (the only way these tests run),
#: the service holds each job as the administrator, so its account cannot release it
HELD = "Slurm: JobHeldAdmin (held until ilucid releases it)"
#: the core's logical nodes for the test node, in order, and the GPU indices of each
LOGICAL = {0: set(range(0, 4)), 1: set(range(4, 8))}  # node1/a100, node1/v100


class Server:
    """``ilucid serve --backend slurm``; jobs are submitted with a token mapped to
    ``account`` (run as root, the service submits each job as its token's account)."""

    def __init__(self, cluster: SlurmCluster, data: Path, out: Path, account: str) -> None:
        self.cluster, self.data, self.out, self.account = cluster, data, out, account
        self.port = free_port()
        self.env = {
            **cluster.env(),
            "ILUCID_URL": f"http://127.0.0.1:{self.port}",
            "OUT": str(out),
        }
        self.process: subprocess.Popen[str] | None = None
        self.user_env: dict[str, str] = {}

    def start(self) -> None:
        command = [
            sys.executable,
            "-m",
            "ilucid.cli",
            "serve",
            "--backend",
            "slurm",
            "--slurm-conf",
            self.cluster.conf,
            "--data-dir",
            str(self.data),
            "--port",
            str(self.port),
            "--interval",
            "0.5",
            # the orders and preemptions asserted below are tiered's (issue 7's contract)
            "--policy",
            "tiered",
        ]
        log = (self.data.parent / "serve.log").open("a")  # slurm_data: removed after
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, text=True, env=self.env
        )
        deadline = time.monotonic() + 60
        while run_ilucid("nodes", "--data-dir", str(self.data), env=self.env).returncode != 0:
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.process.kill()
                raise AssertionError(
                    f"serve did not start: {(self.data.parent / 'serve.log').read_text()}"
                )
            time.sleep(0.3)
        self.env["ILUCID_TOKEN"] = (self.data / "admin.token").read_text().strip()
        if "ILUCID_TOKEN" not in self.user_env:  # made once: a restart keeps the database
            made = run_ilucid(
                "token", "create", "--user", "alice", "--tenant", "lab",
                "--unix-user", self.account, "--data-dir", str(self.data), env=self.env,
            )  # fmt: skip
            assert made.returncode == 0, made.stderr
            self.user_env = {**self.env, "ILUCID_TOKEN": made.stdout.strip()}

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)

    def submit(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_ilucid("submit", *args, env=self.user_env)

    def states(self) -> dict[str, str]:
        lines = run_ilucid("jobs", env=self.env).stdout.splitlines()[1:]
        rows = [line.split() for line in lines if line.strip().strip("-")]  # no rule line
        return {row[0]: row[4] for row in rows}

    def wait_all(self, count: int, timeout: float = 240) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            states = self.states()
            if len(states) == count and all(
                s in ("succeeded", "failed", "cancelled") for s in states.values()
            ):
                return states
            time.sleep(0.5)
        log = (self.data.parent / "serve.log").read_text()[-4000:]
        raise AssertionError(f"jobs did not all end: {states}\n{log}")


@pytest.fixture
def server(
    slurm_cluster: SlurmCluster,
    slurm_data: Path,
    slurm_account: str,
    job_scratch: Path,
) -> Iterator[Server]:
    # the data and output folders are where the jobs' account reaches (not tmp_path)
    running = Server(slurm_cluster, slurm_data / "data", job_scratch, slurm_account)
    running.start()
    yield running
    running.stop()
    # leave the shared cluster empty for the next test
    ours = [
        j
        for j in json.loads(slurm_cluster.squeue())["jobs"]
        if j["job_state"] in ("PENDING", "RUNNING")
    ]
    if ours:
        subprocess.run(
            ["scancel", *[str(j["job_id"]) for j in ours]], env=slurm_cluster.env(), check=False
        )


def submit_job(server: Server, gpus: int, seconds: float, job_class: str = "training") -> str:
    done = server.submit(
        "--gpus",
        str(gpus),
        "--class",
        job_class,
        "--estimate",
        "600",
        "--",
        "sh",
        "-c",
        JOB.format(seconds=seconds),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def runs(out: Path, job_id: str) -> list[tuple[float, set[int], str]]:
    """Each start of a job: (time, GPU indices it saw, Slurm job id)."""
    found = []
    for line in (out / job_id).read_text().splitlines():
        if line.startswith("start"):
            _, when, *rest = line.split()
            gpus = {int(g) for g in rest[0].split(",")} if len(rest) == 2 else set()
            found.append((float(when), gpus, rest[-1]))
    return found


def slurm_jobs_by_ilucid_id(cluster: SlurmCluster, server: Server) -> dict[str, set[int]]:
    """This service's Slurm jobs (named ``ilucid-<instance>-<id>``), by ilucid job id."""
    prefix = f"ilucid-{(server.data / 'slurm' / 'instance').read_text().strip()}-"
    jobs: dict[str, set[int]] = {}
    for job in json.loads(cluster.squeue())["jobs"]:
        if job["name"].startswith(prefix):
            jobs.setdefault(job["name"].removeprefix(prefix), set()).add(int(job["job_id"]))
    return jobs


def test_ten_jobs_run_in_ilucids_order_on_its_gpus_and_inference_requeues_training(
    server: Server, slurm_cluster: SlurmCluster
) -> None:
    sizes = (4, 2, 2, 1, 3, 4, 2, 1, 1)
    # long enough that all 8 GPUs are still busy when the inference job comes, even on
    # a loaded machine: only then must it preempt (a free GPU anywhere is taken first)
    training = [submit_job(server, gpus, seconds=30) for gpus in sizes]
    # while most wait, ilucid's explanation carries Slurm's own reason
    time.sleep(1.0)
    shown = []
    for job_id in reversed(training):
        shown.append(run_ilucid("explain", job_id, env=server.env).stdout)
        if HELD in shown[-1]:
            break
    assert HELD in shown[-1], shown
    inference = submit_job(server, 1, seconds=1, job_class="inference")

    final = server.wait_all(10, timeout=400)
    assert set(final.values()) == {"succeeded"}, final

    engine = make_engine(f"sqlite:///{server.data / 'ilucid.db'}")
    with Session(engine) as session:
        starts = session.scalars(
            select(DecisionRow).where(DecisionRow.action == "start").order_by(DecisionRow.id)
        ).all()
        messages = {d.job_id: d.message for d in session.scalars(select(DecisionRow))}
    assert messages
    seen: dict[str, int] = {}
    firsts: list[tuple[float, float, str]] = []  # decision time, real start, job
    for decision in starts:
        k = seen.get(decision.job_id, 0)
        seen[decision.job_id] = k + 1
        real = runs(server.out, decision.job_id)
        assert len(real) > k, (decision.job_id, real)
        when, gpus, _slurm_id = real[k]
        parts = json.loads(decision.placement)
        chosen = set().union(*(LOGICAL[index] for index, _ in parts))
        assert gpus <= chosen and len(gpus) == sum(n for _, n in parts), (
            decision.job_id,
            gpus,
            parts,
        )
        assert when >= decision.time - 0.05, "Slurm started a job before ilucid released it"
        if k == 0:
            firsts.append((decision.time, when, decision.job_id))
    for d1, s1, j1 in firsts:
        for d2, s2, j2 in firsts:
            if d2 - d1 > 3.0:
                assert s1 < s2, f"{j1} was released before {j2} but started after it"
    # the inference job preempted a training job through `scontrol requeuehold`
    preempted = [
        j
        for j in training
        if "preempted by inference job" in run_ilucid("explain", j, env=server.env).stdout
    ]
    assert preempted, "no training job was preempted"
    assert any(len(runs(server.out, j)) >= 2 for j in preempted)
    assert inference in final
    # one Slurm job per ilucid job, whatever happened
    by_id = slurm_jobs_by_ilucid_id(slurm_cluster, server)
    assert all(len(ids) == 1 for ids in by_id.values()), by_id


def test_controller_restart_and_ilucid_crash_lose_or_duplicate_nothing(
    server: Server, slurm_cluster: SlurmCluster
) -> None:
    jobs = [submit_job(server, 2, seconds=3) for _ in range(6)]
    time.sleep(1.0)
    slurm_cluster.stop_controller()
    jobs += [submit_job(server, 2, seconds=2) for _ in range(2)]  # accepted while Slurm is down
    time.sleep(2.0)
    slurm_cluster.start()
    time.sleep(2.0)
    server.kill()  # SIGKILL: no chance to clean up
    server.start()
    jobs += [submit_job(server, 1, seconds=1) for _ in range(2)]
    final = server.wait_all(len(jobs))
    assert set(final) == set(jobs) and set(final.values()) == {"succeeded"}, final
    for job_id in jobs:
        assert len(runs(server.out, job_id)) == 1, (
            f"{job_id} ran {len(runs(server.out, job_id))} times"
        )
    by_id = slurm_jobs_by_ilucid_id(slurm_cluster, server)
    assert all(len(by_id.get(j, ())) == 1 for j in jobs), by_id


def test_a_job_submitted_to_slurm_directly_can_opt_in(
    server: Server, slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    script = tmp_path / "mine.sh"
    script.write_text('#!/bin/sh\necho "ran on $CUDA_VISIBLE_DEVICES" > "$OUT/direct"\n')
    script.chmod(0o755)
    submitted = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--hold",
            "--comment=ilucid",
            "--gres=gpu:1",
            f"--output={tmp_path}/direct.log",
            str(script),
        ],
        env=server.env,
        capture_output=True,
        text=True,
        check=True,
    )
    slurm_id = submitted.stdout.strip()
    final = server.wait_all(1, timeout=60)
    assert list(final.values()) == ["succeeded"], final
    assert (server.out / "direct").read_text().startswith("ran on ")
    job_id = next(iter(final))
    shown = run_ilucid("jobs", env=server.env).stdout
    assert job_id in shown
    assert slurm_jobs_by_ilucid_id(slurm_cluster, server)[job_id] == {int(slurm_id)}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--wrap=rm -rf /"], "starts with '-'"),
        (["sh", "-c", "echo a\nscancel 1"], "newlines"),
        (["--", "--uid=0", "true"], "starts with '-'"),
        (["true;scancel", "-u", "root"], "shell syntax"),
    ],
)
def test_injection_is_refused_with_the_field_named(
    server: Server, argv: list[str], message: str
) -> None:
    done = server.submit("--gpus", "1", "--", *argv)
    assert done.returncode != 0
    assert message in (done.stderr + done.stdout)


def test_fail_open_hands_held_jobs_to_slurm_when_ilucid_is_gone(
    server: Server, slurm_cluster: SlurmCluster
) -> None:
    # 16 GPUs asked of 8, each job long enough that the last two are still held when
    # ilucid is killed however slowly the CLI submits on a loaded machine
    jobs = [submit_job(server, 4, seconds=15) for _ in range(4)]
    server.kill()
    held = [j for j in jobs if not (server.out / j).exists()]
    assert held, "every job started before ilucid was killed"
    fresh = run_ilucid(
        "slurm-release-held",
        "--data-dir",
        str(server.data),
        "--slurm-conf",
        slurm_cluster.conf,
        "--if-idle-for",
        "3600",
        env=server.env,
    )
    assert "nothing released" in fresh.stdout, "a service seen recently is left alone"
    done = run_ilucid(
        "slurm-release-held",
        "--data-dir",
        str(server.data),
        "--slurm-conf",
        slurm_cluster.conf,
        env=server.env,
    )
    assert done.returncode == 0 and "released" in done.stdout, done.stderr
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all((server.out / j).exists() for j in jobs):
        time.sleep(0.5)
    assert all(len(runs(server.out, j)) == 1 for j in jobs), "Slurm ran every held job once"
    while time.monotonic() < deadline and not all(
        "end" in (server.out / j).read_text() for j in jobs
    ):  # leave the cluster idle for the next test
        time.sleep(0.5)


def test_placement_across_two_slurmd_nodes(
    slurm_two_nodes: SlurmCluster, slurm_data: Path, slurm_account: str, job_scratch: Path
) -> None:
    """Two slurmd daemons on this host: a job goes to the node and GPU type the core chose,
    and a job spread over both nodes runs on both, seen back as the core's logical nodes."""
    from ilucid.backends.base import ProcessState
    from ilucid.backends.slurm import SlurmBackend

    out = job_scratch
    backend = SlurmBackend(slurm_data, slurm_conf=slurm_two_nodes.conf)
    names = [n.name for n in backend.observe().cluster.nodes]
    assert names == ["node1/a100", "node1/v100", "node2/a100", "node2/v100"]
    record = 'echo "$(hostname) $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES" >> "{out}/$ILUCID_JOB_ID"'
    wanted = {
        "one": [("node2/v100", 2)],
        "both": [("node1/a100", 2), ("node2/a100", 2)],
    }
    for job_id, placement in wanted.items():
        gpus = sum(n for _, n in placement)
        command = ["sh", "-c", record.format(out=out) + "; sleep 3"]
        if len(placement) > 1:  # one task per node, each recording where it ran
            command = ["srun", "--ntasks-per-node=1", *command]
        backend.enqueue(job_id, command, gpus, run_as=slurm_account)
    deadline = time.monotonic() + 60
    seen: dict[str, object] = {}
    while time.monotonic() < deadline:
        observed = backend.observe().jobs
        for job_id, placement in wanted.items():
            gpus = sum(n for _, n in placement)
            backend.start(job_id, [], gpus, placement=placement)
            job = observed.get(job_id)
            if job is not None and job.state is ProcessState.RUNNING and job.parts:
                seen[job_id] = job.parts
        if len(seen) == len(wanted):
            break
        time.sleep(0.3)
    assert seen == {job_id: tuple(p) for job_id, p in wanted.items()}, seen

    def lines(name: str) -> list[str]:
        path = out / name
        return path.read_text().splitlines() if path.exists() else []

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (len(lines("both")) < 2 or not lines("one")):
        time.sleep(0.2)
    [one] = lines("one")
    assert one.split()[1] == "node2" and set(one.split()[2].split(",")) <= {"4", "5", "6", "7"}
    both = sorted(line.split()[1] for line in lines("both"))
    assert both == ["node1", "node2"]

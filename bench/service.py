"""Service benchmark (issues #6 and #30): the API under concurrent submissions, one big
scheduling pass.

1. A real ``ilucid serve`` subprocess (SQLite in WAL mode, 4 virtual GPUs, the
   default policy and interval) that already holds a history: 10,000 ended jobs and
   2,000 pending ones, written straight into its database with the service's own
   models before it starts (through the API that would take minutes). One running
   1-GPU job (``sleep 600``) keeps every pending 4-GPU job waiting, so each pass
   has real work on every pending job. Users submit as tokens mapped to Unix
   accounts (``ilucid token create --unix-user``; when root the bench creates two
   accounts with ``useradd`` and removes them after), from a ``cwd`` the service
   checks their account can enter. Over HTTP with keep-alive ``httpx`` clients:
   one client, then 8 at once, while another client polls ``/healthz``. Goals for 8
   clients: >= 500 submissions/s, p99 <= 100 ms, ``/healthz`` p99 <= 50 ms; each is
   printed beside the single-client figure and as a ratio to it.
   Every job the bench started ends before it exits (the sleeping job is cancelled
   and waited for), the service is stopped and the accounts are removed.
2. One scheduling pass of the tiered policy with 10,000 pending jobs on a
   2,048-node x 8-GPU inventory that is full except for a few GPUs, median
   of 7 passes; goal <= 100 ms. The baseline printed beside it is the same
   pass on an empty queue (the fixed cost). Also the first pass on an empty
   inventory, which places as many of the 10,000 jobs as fit (scan depth 200
   bounds how many it tries).

``--api-only`` runs part 1 alone; ``--clients``, ``--per-client`` size it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy import insert
from sqlalchemy.orm import Session

from ilucid.core import Cluster, JobSpec, Scheduler, make_policy
from ilucid.service.db import JobRow, TransitionRow, make_engine
from serve_process import free_port, ilucid_cli, serving

GPUS = 4
ENDED, PENDING = 10_000, 2_000
ACCOUNTS = ("ilucid-bench-a", "ilucid-bench-b")
USERS = (("alice", "physics"), ("bob", "biology"))
BLOCKER = f"j{ENDED + 1:06d}"  # the running job that keeps the queue waiting
BLOCKER_OWNER = (ENDED + 1) % len(USERS)  # job k belongs to USERS[k % 2]


# -- the Unix accounts the users' tokens map to ------------------------------------------------
@contextlib.contextmanager
def unix_accounts() -> Iterator[tuple[str, ...] | None]:
    """Two real, unprivileged accounts when root (removed after); None otherwise."""
    if os.geteuid() != 0:
        yield None
        return
    made = []
    try:
        for name in ACCOUNTS:
            if subprocess.run(["id", name], capture_output=True, check=False).returncode != 0:
                useradd = shutil.which("useradd") or "/usr/sbin/useradd"
                subprocess.run([useradd, "--system", "--no-create-home", name], check=True)
                made.append(name)
        yield ACCOUNTS
    finally:
        for name in ACCOUNTS:
            _end_processes_of(name)
        userdel = shutil.which("userdel") or "/usr/sbin/userdel"
        for name in made:
            subprocess.run([userdel, name], check=False)


def _end_processes_of(account: str) -> None:
    """Anything still running as a bench account is a leak: say so, then end it."""
    found = subprocess.run(["pgrep", "-u", account], capture_output=True, text=True, check=False)
    for pid in found.stdout.split():
        print(f"  LEAK: process {pid} of {account} still ran; killed", flush=True)
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


# -- a service that has run a while -------------------------------------------------------------
def make_tokens(data: Path, accounts: tuple[str, ...] | None) -> list[str]:
    """One token per user, mapped to its Unix account (this also creates the database)."""
    tokens = []
    for index, (user, tenant) in enumerate(USERS):
        mapped = ["--unix-user", accounts[index]] if accounts else []
        made = ilucid_cli(
            "token", "create", "--user", user, "--tenant", tenant, "--data-dir", str(data), *mapped
        )
        tokens.append(made.splitlines()[-1])
    return tokens


def write_history(data: Path, accounts: tuple[str, ...] | None) -> None:
    """10,000 ended jobs, then the blocker and 2,000 pending 4-GPU jobs, as stored rows."""
    engine = make_engine(f"sqlite:///{data / 'ilucid.db'}")
    start = time.time() - 30 * 86400
    jobs, moves = [], []

    def job(
        number: int, state: str, submit: float, gpus: int, command: list[str], estimate: float
    ) -> str:
        user, tenant = USERS[number % len(USERS)]
        job_id = f"j{number:06d}"
        jobs.append(
            {
                "id": job_id,
                "user": user,
                "tenant": tenant,
                "job_class": "training",
                "gpus": gpus,
                "command": json.dumps(command),
                "state": state,
                "submit_time": submit,
                "estimate_s": estimate,
                "run_as": accounts[number % 2] if accounts else None,
                "gpu_indices": "",
                "preemptions": 0,
                "priority": 0,
                "attempts": 0,
            }
        )
        moves.append(_move(job_id, submit, "", "pending", "submit", "submitted"))
        return job_id

    for number in range(1, ENDED + 1):
        submit = start + number * 200.0
        ran = 30.0 + (number * 7919) % 7200
        state = ("succeeded", "succeeded", "succeeded", "failed", "cancelled")[number % 5]
        job_id = job(number, state, submit, 1 + number % GPUS, ["python", "train.py"], ran)
        jobs[-1].update(
            first_start=submit + 5, end_time=submit + 5 + ran, exit_code=int(state == "failed")
        )
        moves.append(_move(job_id, submit + 5, "pending", "running", "start", "started"))
        moves.append(_move(job_id, submit + 5 + ran, "running", state, "exit", "exited"))
    now = time.time() - 60
    # the shortest and oldest: placed first by every policy, and never preempted for the
    # longer jobs behind it
    job(ENDED + 1, "pending", now, 1, ["sleep", "600"], 600.0)
    for number in range(ENDED + 2, ENDED + 2 + PENDING):
        job(number, "pending", now + number * 1e-3, GPUS, ["true"], 3600.0 * (1 + number % 24))
    with Session(engine) as session:
        session.execute(insert(JobRow), jobs)
        session.execute(insert(TransitionRow), moves)
        session.commit()
    engine.dispose()


def _move(job_id: str, at: float, old: str, new: str, stimulus: str, why: str) -> dict[str, object]:
    return {
        "job_id": job_id,
        "time": at,
        "from_state": old,
        "to_state": new,
        "stimulus": stimulus,
        "reason": why,
    }


@contextlib.contextmanager
def running_service(data: Path, log: Path) -> Iterator[tuple[str, int]]:
    """``ilucid serve`` on ``GPUS`` virtual GPUs until the block ends; its URL and pid."""
    serve_args = ["--data-dir", str(data), "--gpus", str(GPUS)]
    with serving(serve_args, free_port(), log) as (url, server):
        yield url, server.pid


def wait_for(check: object, what: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.5)
    print(f"  (gave up waiting {timeout_s:.0f} s for {what})", flush=True)
    return False


# -- the burst ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Burst:
    clients: int
    count: int
    rate: float
    p50: float
    p99: float
    health_p99: float
    health_max: float
    server_cpu_ms: float  # the service's CPU time (all its threads) per submission
    client_cpu_ms: float  # this bench's, per submission
    load: float  # the machine's 1-minute load average at the end (2 cores)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (every thread), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def burst(url: str, pid: int, tokens: list[str], clients: int, per_client: int) -> Burst:
    """``clients`` keep-alive clients submit ``per_client`` jobs each, at once, while one
    more polls /healthz every 10 ms."""
    body = {"command": ["true"], "gpus": GPUS, "cwd": tempfile.gettempdir(), "estimate_s": 7200}
    latencies: list[list[float]] = [[] for _ in range(clients)]
    health: list[float] = []
    failures: list[str] = []
    ready = threading.Barrier(clients + 1)
    done = threading.Event()

    def submitter(index: int) -> None:
        auth = {"Authorization": f"Bearer {tokens[index % len(tokens)]}"}
        with httpx.Client(base_url=url, headers=auth, timeout=60) as client:
            client.get("/healthz")  # the connection is open before the clock starts
            ready.wait()
            for _ in range(per_client):
                t0 = time.perf_counter()
                response = client.post("/jobs", json=body)
                latencies[index].append(time.perf_counter() - t0)
                if response.status_code != 201:
                    failures.append(f"{response.status_code} {response.text[:200]}")

    def poller() -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            client.get("/healthz")
            while not done.is_set():
                t0 = time.perf_counter()
                client.get("/healthz")
                health.append(time.perf_counter() - t0)
                time.sleep(0.01)

    threads = [threading.Thread(target=submitter, args=(i,)) for i in range(clients)]
    watcher = threading.Thread(target=poller)
    for thread in threads:
        thread.start()
    watcher.start()
    ready.wait()
    started = time.perf_counter()
    server_cpu, client_cpu = cpu_seconds(pid), time.process_time()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    server_cpu, client_cpu = cpu_seconds(pid) - server_cpu, time.process_time() - client_cpu
    done.set()
    watcher.join()
    if failures:
        raise RuntimeError(f"{len(failures)} submissions failed, e.g. {failures[0]}")
    every = [x for per in latencies for x in per]
    return Burst(
        clients,
        len(every),
        len(every) / elapsed,
        percentile(every, 0.5),
        percentile(every, 0.99),
        percentile(health, 0.99),
        max(health),
        server_cpu / len(every) * 1000,
        client_cpu / len(every) * 1000,
        os.getloadavg()[0],
    )


def end_the_blocker(url: str, token: str) -> None:
    """Cancel the sleeping job and wait until its process (and runner) are gone."""
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=auth, timeout=30) as client:
        client.delete(f"/jobs/{BLOCKER}")
        wait_for(
            lambda: client.get(f"/jobs/{BLOCKER}").json()["state"] == "cancelled",
            f"{BLOCKER} to be cancelled",
            60,
        )


def settle(url: str, tokens: list[str]) -> None:
    """Until the sleeping job runs and the duration model's first fit is in (a service
    that ran a while has one)."""
    auth = {"Authorization": f"Bearer {tokens[BLOCKER_OWNER]}"}
    with httpx.Client(base_url=url, headers=auth, timeout=30) as client:
        wait_for(
            lambda: client.get(f"/jobs/{BLOCKER}").json()["state"] == "running",
            f"{BLOCKER} to run",
            60,
        )
        wait_for(lambda: client.get("/model").json()["version"] >= 1, "a model", 300)


def end_leftovers(data: Path) -> None:
    """Once the service stopped, nothing the bench started may run: a job's runner left
    is a leak, said and ended."""
    wait_for(lambda: not leftover_processes(data), "the jobs' runners to exit", 15)
    left = leftover_processes(data)
    if left:
        print(f"  LEAK: processes {left} of this bench still ran; killed", flush=True)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def leftover_processes(data: Path) -> list[int]:
    """Processes (the jobs' runners among them) whose command line names ``data``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if str(data).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def api_under_load(clients: int, per_client: int) -> tuple[Burst, Burst]:
    """Single-client, then ``clients``-client figures against one service with history."""
    with unix_accounts() as accounts, tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "data"
        tokens = make_tokens(data, accounts)
        began = time.perf_counter()
        write_history(data, accounts)
        mapped = ", ".join(accounts) if accounts else "no (not root)"
        print(
            f"  history: {ENDED:,} ended and {PENDING:,} pending jobs written straight into"
            f" the database with the service's models ({time.perf_counter() - began:.1f} s);"
            f" users mapped to Unix accounts: {mapped}",
            flush=True,
        )
        try:
            with running_service(data, Path(folder) / "serve.log") as (url, pid):
                try:
                    settle(url, tokens)
                    single = burst(url, pid, tokens, 1, per_client)
                    many = burst(url, pid, tokens, clients, per_client)
                finally:
                    end_the_blocker(url, tokens[BLOCKER_OWNER])
        except BaseException:
            log = Path(folder) / "serve.log"
            if log.exists():
                print(log.read_text()[-3000:], file=sys.stderr)
            raise
        finally:
            end_leftovers(data)
    return single, many


def report(single: Burst, many: Burst) -> None:
    def line(b: Burst) -> str:
        return (
            f"{b.clients} client(s), {b.count:,} submissions: {b.rate:,.0f}/s, p50"
            f" {b.p50 * 1000:.1f} ms, p99 {b.p99 * 1000:.1f} ms; /healthz meanwhile p99"
            f" {b.health_p99 * 1000:.1f} ms (max {b.health_max * 1000:.1f} ms); CPU per"
            f" submission: service {b.server_cpu_ms:.2f} ms, clients {b.client_cpu_ms:.2f} ms;"
            f" load average {b.load:.1f} on {os.cpu_count()} cores"
        )

    print(f"API submissions, {line(single)}")
    print(f"API submissions, {line(many)}")

    def ratio(name: str, a: float, b: float, goal: str, met: bool) -> None:
        print(
            f"  {name}: {b:,.1f} vs {a:,.1f} ({b / a:.2f}x the single client); {goal}: "
            f"{'met' if met else 'MISSED'}"
        )

    ratio("submissions/s", single.rate, many.rate, "goal >= 500/s", many.rate >= 500)
    ratio("p50 ms", single.p50 * 1e3, many.p50 * 1e3, "no goal", True)
    ratio("p99 ms", single.p99 * 1e3, many.p99 * 1e3, "goal <= 100 ms", many.p99 <= 0.1)
    ratio(
        "/healthz p99 ms",
        single.health_p99 * 1e3,
        many.health_p99 * 1e3,
        "goal <= 50 ms",
        many.health_p99 <= 0.05,
    )


# -- the core's pass --------------------------------------------------------------------------
def first_pass_on_empty(pending: int = 10_000, nodes: int = 2048) -> tuple[float, int]:
    """The pass that places ``pending`` jobs on an empty inventory: (seconds, starts)."""
    scheduler = Scheduler(Cluster.homogeneous(nodes, 8), make_policy("tiered"))
    for k in range(pending):
        gpus = (1, 2, 4, 8)[k % 4]
        scheduler.submit(JobSpec(f"p{k}", 0, gpus, 100, estimate=100.0 * (1 + k % 50)), 0)
    t0 = time.perf_counter()
    decisions = scheduler.schedule(1)
    return time.perf_counter() - t0, len(decisions)


def scheduling_pass(pending: int, nodes: int = 2048, repeats: int = 7) -> float:
    cluster = Cluster.homogeneous(nodes, 8)
    scheduler = Scheduler(cluster, make_policy("tiered"))
    # fill the cluster, leaving 3 GPUs free, then queue the pending jobs
    for k in range(nodes - 1):
        scheduler.submit(JobSpec(f"f{k}", 0, 8, 1e9, estimate=1e9), 0)
    scheduler.submit(JobSpec("f-last", 0, 5, 1e9, estimate=1e9), 0)
    scheduler.schedule(0)
    assert scheduler.free.free_total == 3
    for k in range(pending):  # none fits in the 3 free GPUs: every pass scans the queue
        gpus = (4, 8)[k % 2]
        scheduler.submit(JobSpec(f"p{k}", 1, gpus, 100, estimate=100.0 * (1 + k % 50)), 1)
    times = []
    for repeat in range(repeats):
        t0 = time.perf_counter()
        scheduler.schedule(2 + repeat)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-only", action="store_true", help="only the API under load")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--per-client", type=int, default=300, help="submissions per client")
    args = parser.parse_args()
    single, many = api_under_load(args.clients, args.per_client)
    report(single, many)
    if args.api_only:
        return 0
    busy = scheduling_pass(10_000)
    empty = scheduling_pass(0)
    print(
        f"one tiered pass, 10,000 pending on 2,048 x 8 GPUs: {busy * 1000:.3f} ms median"
        f" (goal <= 100 ms); with an empty queue {empty * 1000:.3f} ms"
        f" ({busy / max(empty, 1e-9):,.0f}x)"
    )
    seconds, starts = first_pass_on_empty()
    print(
        f"the first pass on an empty 2,048 x 8 inventory with 10,000 pending: {seconds * 1000:.0f}"
        f" ms, {starts:,} jobs started ({seconds / max(starts, 1) * 1e6:.0f} us per start)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

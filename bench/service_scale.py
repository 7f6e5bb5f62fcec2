"""The live service at scale (issue 32): the real ``ilucid serve`` on hollow nodes.

Run with ``make bench-service-scale`` (10,000 hollow nodes x 8 GPUs, 100,000 stored
pending jobs, on SQLite and on PostgreSQL), or smaller::

    python bench/service_scale.py --quick          # 1,000 nodes x 10,000 pending, SQLite
    python bench/service_scale.py --db postgresql --measure-s 120

What runs is the product, not an inner call: ``ilucid serve`` as a subprocess with its
real API, its real database (SQLite in the data directory, or a throw-away PostgreSQL
server from Debian's packages) and its reconcile loop at the default 2 s interval,
under the default profile's live build. Only the cluster is not real: the hollow
backend (``--backend hollow``, benchmarks only, as Kubernetes' kubemark) keeps the
backend contract on nodes that exist in memory, and ends each job after a run time
drawn from a trace's durations (Philly when the traces are at hand), scaled so that
1 % of the running jobs end per pass on average.

1. **A backlog.** ``--pending`` jobs, plus ``--fill`` (one per GPU) for the first pass
   to start, are written straight into the database before the service starts
   (through the API it would take minutes), as a service that has queued them would
   hold them: sizes 1/2/4/8/16/32 GPUs at 55/10/12/17/4/2 %, log-normal estimates
   with a median of 2 h, submitted over the last hour.
2. **Warm-up.** The service starts, loads the backlog, and its first pass fills the
   cluster (``--hollow-found-running``: those jobs are taken as found mid-run, so
   jobs end at the steady rate from then on); the bench waits for a few passes
   (their time is printed, not counted).
3. **Measured, in two windows of ``--measure-s`` seconds.** First the jobs only end
   (passes every ``--interval``, 1 % of the running jobs ending in each); then, as
   they go on ending, ``--clients`` keep-alive clients submit jobs through ``POST
   /jobs`` at ``--rate`` per second in all (a submission wakes the loop, so passes
   come closer together and each sees fewer ends). Every reconcile pass is read from
   the service's debug log, which times each pass's parts (``PassSplit``): observe
   (take the inbox, read the backend, record what ended), decide (the core's pass),
   apply (store decisions, start and stop jobs), commit (the database). Printed per
   window: their p50 and p99 and the jobs that ended per pass; then the submissions
   accepted per second with their latency, and the service's peak memory (VmHWM).

Goals (issue 32): at 10,000 nodes x 100k pending, reconcile p50 <= 100 ms and p99 <= 300
ms on both databases, >= 300 submissions/s accepted, peak memory <= 2 GiB.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
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

from ilucid.service.db import JobRow, TransitionRow, make_engine
from ilucid.service.latency import PASS_PARTS
from ilucid.traces import trace_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from throwaway_postgres import throwaway_postgres

from serve_process import free_port, ilucid_cli, serving

SIZES = ((1, 0.55), (2, 0.10), (4, 0.12), (8, 0.17), (16, 0.04), (32, 0.02))
PASS_LINE = re.compile(
    r"reconcile pass: "
    + ", ".join(rf"{part} (?P<{part}>[\d.]+) ms" for part in PASS_PARTS)
    + r" \((?P<decisions>\d+) decisions\)"
)


@dataclass(frozen=True, slots=True)
class Pass:
    seconds: dict[str, float]
    decisions: int
    ended: int  # jobs seen to end (succeeded) in this pass

    @property
    def total_ms(self) -> float:
        return sum(self.seconds.values())


# -- the stored backlog -------------------------------------------------------------------
def write_backlog(url: str, pending: int, seed: int = 7) -> None:
    """``pending`` stored pending jobs, as a service that accepted them holds them."""
    draw = random.Random(seed)
    sizes, weights = zip(*SIZES, strict=True)
    engine = make_engine(url)
    now = time.time()
    chunk = 10_000
    with Session(engine) as session:
        for first in range(1, pending + 1, chunk):
            jobs, moves = [], []
            for number in range(first, min(pending, first + chunk - 1) + 1):
                job_id = f"j{number:06d}"
                submit = now - 3600 + 3600 * number / pending
                jobs.append(
                    {
                        "id": job_id,
                        "user": f"user{number % 50}",
                        "tenant": f"team{number % 7}",
                        "job_class": "training",
                        "gpus": draw.choices(sizes, weights)[0],
                        "command": json.dumps(["python", "train.py"]),
                        "state": "pending",
                        "submit_time": submit,
                        "estimate_s": 7200 * math.exp(draw.gauss(0.0, 1.0)),
                        "gpu_indices": "",
                        "preemptions": 0,
                        "priority": 0,
                        "attempts": 0,
                    }
                )
                moves.append(
                    {
                        "job_id": job_id,
                        "time": submit,
                        "from_state": "",
                        "to_state": "pending",
                        "stimulus": "submit",
                        "reason": "submitted",
                    }
                )
            session.execute(insert(JobRow), jobs)
            session.execute(insert(TransitionRow), moves)
            session.commit()
    engine.dispose()


# -- the service ----------------------------------------------------------------------------
@contextlib.contextmanager
def running_service(
    data: Path, db: str, args: argparse.Namespace, log: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``ilucid serve --backend hollow`` until the block ends: its URL and process."""
    serve_args = ["--data-dir", str(data), "--db", db, "--interval", str(args.interval)]
    serve_args += ["--backend", "hollow", "--hollow-nodes", str(args.nodes)]
    serve_args += ["--hollow-gpus-per-node", str(args.gpus_per_node)]
    serve_args += ["--hollow-mean-s", str(args.interval / args.churn), "--hollow-found-running"]
    if args.durations:
        serve_args += ["--hollow-durations", args.durations]
    serve_args += ["--log-level", "debug", "--log-format", "json"]
    with serving(serve_args, free_port(), log, args.start_timeout_s) as running:
        yield running


def read_passes(log: Path, offset: int) -> tuple[list[Pass], int]:
    """The reconcile passes logged from byte ``offset`` on, and the offset after them."""
    passes, ended = [], 0
    with log.open("rb") as handle:
        handle.seek(offset)
        for raw in handle:
            if not raw.endswith(b"\n"):
                break  # a line still being written: read it next time
            offset += len(raw)
            try:
                message = json.loads(raw).get("message", "")
            except ValueError:
                continue
            if "running -> succeeded" in message:
                ended += 1
                continue
            found = PASS_LINE.search(message)
            if found is not None:
                split = {part: float(found[part]) for part in PASS_PARTS}
                passes.append(Pass(split, int(found["decisions"]), ended))
                ended = 0
    return passes, offset


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return math.nan


def job_counts(url: str, token: str) -> tuple[int, int]:
    """Running and pending jobs, as the service's /metrics counts them."""
    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}).text

    def count(state: str) -> int:
        found = re.search(rf'^ilucid_jobs\{{state="{state}"\}} ([\d.e+]+)', text, re.M)
        return int(float(found[1])) if found else 0

    return count("running"), count("pending")


# -- the stream of submissions ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Stream:
    accepted: int
    refused: int
    rate: float
    p50_ms: float
    p99_ms: float


def submit_stream(url: str, token: str, rate: float, clients: int, seconds: float) -> Stream:
    """``clients`` keep-alive clients, each at ``rate / clients`` per second, paced (a
    late client catches up without sleeping, never runs ahead), for ``seconds``: what
    the API accepted in that time is its rate, however far behind the pace it fell."""
    body = {"command": ["python", "train.py"], "gpus": 1, "estimate_s": 3600}
    latencies: list[list[float]] = [[] for _ in range(clients)]
    refused: list[str] = []
    ready = threading.Barrier(clients + 1)
    every = clients / rate

    def client_loop(index: int) -> None:
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=auth, timeout=60) as client:
            client.get("/healthz")
            ready.wait()
            began = time.monotonic()
            sent = 0
            while True:
                due = began + index * every / clients + sent * every
                if due - began > seconds or time.monotonic() - began > seconds:
                    return  # at the deadline, however far behind its pace it fell
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                t0 = time.perf_counter()
                response = client.post("/jobs", json=body)
                latencies[index].append(time.perf_counter() - t0)
                if response.status_code != 201:
                    refused.append(f"{response.status_code} {response.text[:200]}")
                sent += 1

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    ready.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    every_latency = sorted(x for per in latencies for x in per)
    if refused:
        print(f"  {len(refused)} submissions refused, e.g. {refused[0]}", flush=True)
    accepted = len(every_latency) - len(refused)
    return Stream(
        accepted,
        len(refused),
        accepted / elapsed,
        percentile(every_latency, 0.5) * 1000,
        percentile(every_latency, 0.99) * 1000,
    )


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


# -- one database -------------------------------------------------------------------------------
def run_one(kind: str, url: str | None, args: argparse.Namespace) -> dict[str, object]:
    data = Path(tempfile.mkdtemp(prefix=f"ilucid-scale-{kind}-"))
    db = url or f"sqlite:///{data / 'ilucid.db'}"
    token = ilucid_cli(
        "token", "create", "--user", "bench", "--tenant", "bench", "--admin",
        "--data-dir", str(data), "--db", db,
    ).splitlines()[-1]  # fmt: skip
    began = time.monotonic()
    write_backlog(db, args.pending + args.fill)
    stored = args.pending + args.fill
    print(f"  {kind}: {stored:,} pending jobs stored in {time.monotonic() - began:.1f} s")
    log = data / "serve.log"
    began = time.monotonic()
    with running_service(data, db, args, log) as (service_url, server):
        offset, seen = 0, []
        # warm-up: the passes that load the backlog and fill the cluster
        deadline = time.monotonic() + args.warmup_timeout_s
        while len(seen) < args.warmup_passes and time.monotonic() < deadline:
            time.sleep(1)
            passes, offset = read_passes(log, offset)
            seen += passes
            if server.poll() is not None:
                raise RuntimeError(f"serve stopped: {log.read_text()[-3000:]}")
        warmup_s = time.monotonic() - began
        first = seen[0].total_ms if seen else math.nan
        print(
            f"  {kind}: warm-up {warmup_s:.0f} s ({len(seen)} passes; the first, which fills"
            f" the cluster, took {first:,.0f} ms)",
            flush=True,
        )
        _, offset = read_passes(log, offset)  # passes before the windows are not counted
        at_start = job_counts(service_url, token)
        time.sleep(args.measure_s)  # window 1: the jobs end, no one submits
        quiet, offset = read_passes(log, offset)
        running_quiet = job_counts(service_url, token)
        stream = submit_stream(service_url, token, args.rate, args.clients, args.measure_s)
        time.sleep(args.interval)
        busy, offset = read_passes(log, offset)
        running = job_counts(service_url, token)
        peak = peak_rss_mib(server.pid)
    return {
        "kind": kind,
        "windows": [("churn only", quiet, running_quiet), ("churn + submissions", busy, running)],
        "stream": stream,
        "at_start": at_start,
        "peak_mib": peak,
        "warmup_s": warmup_s,
        "load": os.getloadavg(),
    }


def report(result: dict[str, object], args: argparse.Namespace) -> None:
    windows: list[tuple[str, list[Pass], tuple[int, int]]] = result["windows"]  # type: ignore[assignment]
    running, pending = result["at_start"]  # type: ignore[misc]
    stream: Stream = result["stream"]  # type: ignore[assignment]
    print(
        f"\n{result['kind']}: {args.nodes:,} hollow nodes x {args.gpus_per_node} GPUs,"
        f" {args.pending + args.fill:,} jobs stored; at the windows' start {running:,}"
        f" running and {pending:,} pending; two windows of {args.measure_s:.0f} s"
    )
    for title, passes, (running, pending) in windows:
        if not passes:
            print(f"  {title}: no reconcile pass was logged")
            continue
        ended = [p.ended for p in passes]
        churn = statistics.fmean(ended) / running * 100 if running else math.nan
        print(
            f"  {title}: {len(passes)} passes, at its end {running:,} running and"
            f" {pending:,} pending; per pass"
            f" {statistics.fmean(ended):.0f} ended ({churn:.2f} % of running),"
            f" {statistics.fmean(p.decisions for p in passes):.0f} decisions"
        )
        print(f"    {'part':<10} {'p50 ms':>9} {'p99 ms':>9} {'mean ms':>9}")
        for part in PASS_PARTS:
            values = [p.seconds[part] for p in passes]
            print(
                f"    {part:<10} {percentile(values, 0.5):9.1f}"
                f" {percentile(values, 0.99):9.1f} {statistics.fmean(values):9.1f}"
            )
        totals = [p.total_ms for p in passes]
        print(
            f"    {'reconcile':<10} {percentile(totals, 0.5):9.1f}"
            f" {percentile(totals, 0.99):9.1f} {statistics.fmean(totals):9.1f}"
            "   (goal: p50 <= 100, p99 <= 300)"
        )
    print(
        f"  submissions: {stream.accepted:,} accepted at {stream.rate:.0f}/s (goal >= 300;"
        f" asked {args.rate:.0f}/s), {stream.refused} refused, latency p50"
        f" {stream.p50_ms:.1f} ms, p99 {stream.p99_ms:.1f} ms"
    )
    load = result["load"]
    print(
        f"  warm-up {result['warmup_s']:.0f} s; peak memory (VmHWM)"
        f" {result['peak_mib']:,.0f} MiB (goal <= 2,048);"
        f" load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",  # type: ignore[index]
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument(
        "--fill",
        type=int,
        help="jobs stored beside --pending for the first pass to start, so that --pending"
        " still wait once the cluster is full (default: one per GPU)",
    )
    parser.add_argument("--db", default="sqlite,postgresql", help="sqlite, postgresql or both")
    parser.add_argument("--interval", type=float, default=2.0, help="serve's --interval")
    parser.add_argument("--churn", type=float, default=0.01, help="share of jobs ending a pass")
    parser.add_argument("--rate", type=float, default=300.0, help="submissions per second")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--measure-s", type=float, default=60.0)
    parser.add_argument("--warmup-passes", type=int, default=5)
    parser.add_argument("--warmup-timeout-s", type=float, default=900.0)
    parser.add_argument("--start-timeout-s", type=float, default=600.0)
    parser.add_argument(
        "--durations",
        help="trace whose job durations the hollow jobs' run times are drawn from"
        " (default: philly when ILUCID_TRACE_DIR holds it, else log-normal)",
    )
    parser.add_argument("--quick", action="store_true", help="1,000 nodes x 10,000, SQLite")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.pending, args.db, args.measure_s = 1000, 10_000, "sqlite", 20.0
    if args.fill is None:
        args.fill = args.nodes * args.gpus_per_node
    if args.durations is None:
        found = trace_dir()
        if found is not None and (found / "philly-rfold").exists():
            args.durations = "philly"
    print(
        f"bench/service_scale.py: ilucid serve --backend hollow, {args.nodes:,} nodes x"
        f" {args.gpus_per_node} GPUs, {args.pending:,} pending, interval {args.interval:g} s,"
        f" {args.churn:.0%} churn, durations from {args.durations or 'a log-normal'},"
        f" {args.rate:g} submissions/s from {args.clients} clients;"
        f" {time.strftime('%Y-%m-%d')}",
        flush=True,
    )
    for kind in [k.strip() for k in args.db.split(",") if k.strip()]:
        if kind == "sqlite":
            report(run_one(kind, None, args), args)
        elif kind == "postgresql":
            with throwaway_postgres() as url:
                report(run_one(kind, url, args), args)
        else:
            parser.error(f"--db: unknown database {kind!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

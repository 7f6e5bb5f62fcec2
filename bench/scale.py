"""Pass latency of the default profile on large synthetic clusters (issue 20).

Run with ``make bench-scale`` (the full grid: 2k, 10k and 50k nodes x 8 GPUs,
each with 10k and 100k pending jobs), or pick cells::

    python bench/scale.py --nodes 2000,10000 --pending 10000
    python bench/scale.py --quick                 # 2k nodes x 10k pending, 5 passes
    python bench/scale.py --nodes 50000 --pending 100000 --profile   # where time goes

What is timed is ``Scheduler.schedule(now)``, the call the live service's
reconcile loop times as its pass latency and the simulator makes at every
moment, with the default profile built as ``ilucid serve`` builds it (re-plan at
every pass, 300 s profiling runs of new jobs). Nothing leaner.

Each cell runs in its own process, so its peak RSS is its own. The state is
built through the core's public stimuli, as a service that has run for hours
would hold it:

* running jobs fill the cluster (a sequential packer, untimed): each was
  profiled for 300 s (``profiled``, with a sharing score and GPU memory, so
  indolent packing has partners to look at) and then ``adopt``-ed where it runs,
  started 0-12 h ago, so its attained service spans the profile's levels;
* half the pending jobs ran before and were requeued (``adopt``, ``profiled``,
  ``adopt``, ``requeue``: they hold attained service and a report); the other
  half are new, submitted in the last hour;
* sizes 1/2/4/8/16/32 GPUs at 55/10/12/17/4/2 %, log-normal estimates
  (median 2 h).

Then one *cold* pass (the first pass on that backlog: it re-plans everything,
as after a service restart), and ``--passes`` *churn* passes: before each,
2 s later (``serve``'s default interval), 1 % of the running jobs end and as
many new jobs arrive (so the backlog keeps its size). A full collection runs
before each timed pass (untimed), so a pass pays only for its own garbage.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import itertools
import json
import math
import pstats
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ilucid.core import Action, Cluster, JobSpec, JobStatus, Placement, ProfileReport, Scheduler
from ilucid.core.policies import DEFAULT_PROFILE
from ilucid.service.live_policies import live_policy_factory

GPUS_PER_NODE = 8
SIZES = ((1, 0.55), (2, 0.10), (4, 0.12), (8, 0.17), (16, 0.04), (32, 0.02))
INTERVAL_S = 2.0  # ``ilucid serve --interval`` default
LINE_MS = 100.0
FULL_NODES = (2000, 10000, 50000)
FULL_PENDING = (10000, 100000)


@dataclass
class Cell:
    """One measured cell of the table (times in ms, memory in MiB)."""

    nodes: int
    pending: int
    running: int = 0
    setup_s: float = 0.0
    cold_ms: float = math.nan
    cold_starts: int = 0
    cold_preempts: int = 0
    churn_ms: tuple[float, ...] = ()
    #: CPU time of this process in the same passes: what a pass costs when the
    #: shared machine's other work takes the cores from it (wall time counts that too)
    cold_cpu_ms: float = math.nan
    churn_cpu_ms: tuple[float, ...] = ()
    churn_decisions: float = 0.0
    peak_mib: float = math.nan
    error: str = ""

    @property
    def p50(self) -> float:
        return statistics.median(self.churn_ms) if self.churn_ms else math.nan

    @property
    def p50_cpu(self) -> float:
        return statistics.median(self.churn_cpu_ms) if self.churn_cpu_ms else math.nan

    @property
    def p99(self) -> float:
        if not self.churn_ms:
            return math.nan
        ordered = sorted(self.churn_ms)
        return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


Reporter = Callable[[Cell], None]


class _Packer:
    """Fills the cluster (setup only, untimed): a small job goes to the partly used node
    with the fewest free GPUs that hold it, else to a fresh node; a wide job takes whole
    fresh nodes. Returns None once no fresh node is left."""

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        self.fresh = 0  # nodes below this index have been used
        self.partial: list[list[int]] = [[] for _ in range(GPUS_PER_NODE)]  # free -> nodes

    def place(self, gpus: int) -> Placement | None:
        if gpus <= GPUS_PER_NODE:
            for free in range(gpus, GPUS_PER_NODE):
                if self.partial[free]:
                    node = self.partial[free].pop()
                    break
            else:
                if self.fresh >= self.nodes:
                    return None
                node, free = self.fresh, GPUS_PER_NODE
                self.fresh += 1
            if free > gpus:
                self.partial[free - gpus].append(node)
            return Placement(((node, gpus),))
        whole = gpus // GPUS_PER_NODE
        if self.fresh + whole > self.nodes:
            return None
        first, self.fresh = self.fresh, self.fresh + whole
        return Placement(tuple((first + k, GPUS_PER_NODE) for k in range(whole)))


class _Workload:
    """Seeded job specs and profiling reports."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.count = 0

    def spec(self, submit: float) -> JobSpec:
        rng = self.rng
        gpus = rng.choices([s for s, _ in SIZES], [w for _, w in SIZES])[0]
        estimate = min(30 * 86400.0, max(60.0, rng.lognormvariate(math.log(7200.0), 1.5)))
        self.count += 1
        return JobSpec(f"j{self.count}", submit, gpus, estimate, estimate=estimate)

    def report(self) -> ProfileReport:
        rng = self.rng
        return ProfileReport(rng.choice((0, 1, 2)), rng.uniform(2.0, 30.0), None, 0.5)


def _scratch(gpus: int) -> Placement:
    """Where a job ran before the cluster filled (nodes 0..3 are free then)."""
    if gpus <= GPUS_PER_NODE:
        return Placement(((0, gpus),))
    return Placement(tuple((k, GPUS_PER_NODE) for k in range(gpus // GPUS_PER_NODE)))


def _run_profiled(
    scheduler: Scheduler, spec: JobSpec, report: ProfileReport, placement: Placement, at: float
) -> None:
    """``spec`` ran a 300 s profiling run, then started for real on ``placement`` at ``at``."""
    scheduler.submit(spec, spec.submit_time)
    scheduler.adopt(spec.id, placement, at - 300.0)
    scheduler.profiled(spec.id, at, report)
    scheduler.adopt(spec.id, placement, at)


def build(nodes: int, pending: int, seed: int) -> tuple[Scheduler, _Workload]:
    """The state a service would hold after hours: full cluster, ``pending`` queued."""
    cluster = Cluster.homogeneous(nodes, GPUS_PER_NODE)
    scheduler = Scheduler(cluster, live_policy_factory()(DEFAULT_PROFILE))
    work = _Workload(seed)
    rng = work.rng
    for _ in range(pending // 2):  # jobs that ran before and were requeued an hour ago
        ran = rng.uniform(600.0, 6 * 3600.0)
        spec = work.spec(-3600.0 - ran - 300.0 - rng.expovariate(1 / 600.0))
        _run_profiled(scheduler, spec, work.report(), _scratch(spec.num_gpus), -3600.0 - ran)
        scheduler.requeue(spec.id, -3600.0)
    packer = _Packer(nodes)
    while True:  # running jobs, started 0-12 h ago, until the cluster is full
        started = -rng.uniform(0.0, 12 * 3600.0)
        spec = work.spec(started - 300.0 - rng.expovariate(1 / 600.0))
        placement = packer.place(spec.num_gpus)
        if placement is None:
            break
        _run_profiled(scheduler, spec, work.report(), placement, started)
    for _ in range(pending - pending // 2):  # new, never started
        spec = work.spec(-rng.uniform(0.0, 3600.0))
        scheduler.submit(spec, spec.submit_time)
    return scheduler, work


def _churn(scheduler: Scheduler, work: _Workload, now: float) -> None:
    """1 % of the running jobs end; as many new jobs arrive (untimed)."""
    running = [j.spec.id for j in scheduler.jobs.values() if j.status is JobStatus.RUNNING]
    ending = work.rng.sample(running, max(1, len(running) // 100))
    for job_id in ending:
        scheduler.finish(job_id, now)
    for _ in ending:
        spec = work.spec(now)
        scheduler.submit(spec, now)


def _timed_pass(scheduler: Scheduler, now: float) -> tuple[float, float, list[Action]]:
    """One pass: its wall and CPU time in ms, and what it decided."""
    gc.collect()
    cpu = time.process_time()
    began = time.perf_counter()
    decisions = scheduler.schedule(now)
    elapsed = time.perf_counter() - began
    cpu = time.process_time() - cpu
    return elapsed * 1000.0, cpu * 1000.0, [d.action for d in decisions]


def measure(
    nodes: int, pending: int, passes: int, seed: int, budget_s: float, report: Reporter
) -> Cell:
    """One cell, in this process: build, one cold pass, then churn passes (at most
    ``budget_s`` of wall time for them, at least one). ``report`` hears the cell
    after every step, so a cell stopped from outside still says what it did."""
    began = time.perf_counter()
    scheduler, work = build(nodes, pending, seed)
    cell = Cell(nodes, pending, setup_s=time.perf_counter() - began)
    cell.running = sum(1 for j in scheduler.jobs.values() if j.status is JobStatus.RUNNING)
    report(cell)
    cell.cold_ms, cell.cold_cpu_ms, actions = _timed_pass(scheduler, 0.0)
    cell.cold_starts = actions.count(Action.START)
    cell.cold_preempts = actions.count(Action.PREEMPT)
    report(cell)
    decided = 0
    churn_began = time.perf_counter()
    now = 0.0
    for _ in range(passes):
        now += INTERVAL_S
        _churn(scheduler, work, now)
        elapsed, cpu, actions = _timed_pass(scheduler, now)
        cell.churn_ms = (*cell.churn_ms, elapsed)
        cell.churn_cpu_ms = (*cell.churn_cpu_ms, cpu)
        decided += len(actions)
        cell.churn_decisions = decided / len(cell.churn_ms)
        report(cell)
        if time.perf_counter() - churn_began > budget_s:
            break
    return cell


def _print_cell(cell: Cell) -> None:
    """A child's report: the cell so far, with this process's peak RSS, as a JSON line."""
    cell.peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps(asdict(cell)), flush=True)


def _last_cell(output: str | bytes | None) -> Cell | None:
    text = output.decode() if isinstance(output, bytes) else output or ""
    lines = [line for line in text.splitlines() if line.startswith("{")]
    if not lines:
        return None
    fields = json.loads(lines[-1])
    fields["churn_ms"] = tuple(fields["churn_ms"])
    fields["churn_cpu_ms"] = tuple(fields["churn_cpu_ms"])
    return Cell(**fields)


def _run_cell(nodes: int, pending: int, args: argparse.Namespace) -> Cell:
    """``measure`` in a child process (its own peak RSS, a memory cap and a time limit)."""
    command = [
        sys.executable,
        __file__,
        "--cell",
        f"{nodes}x{pending}",
        "--passes",
        str(args.passes),
        "--seed",
        str(args.seed),
        "--budget-s",
        str(args.budget_s),
        "--max-gib",
        str(args.max_gib),
    ]
    began = time.perf_counter()
    try:
        child = subprocess.run(
            command, capture_output=True, text=True, timeout=args.cell_timeout_s, check=False
        )
    except subprocess.TimeoutExpired as stopped:
        spent = time.perf_counter() - began
        cell = _last_cell(stopped.stdout) or Cell(nodes, pending)
        cell.error = f"stopped after {spent:.0f} s (--cell-timeout-s); {_stage(cell)}"
        return cell
    cell = _last_cell(child.stdout) or Cell(nodes, pending)
    if child.returncode != 0:
        last = (child.stderr.strip().splitlines() or ["no output"])[-1]
        cell.error = f"failed (exit {child.returncode}: {last}); {_stage(cell)}"
    return cell


def _stage(cell: Cell) -> str:
    """What a stopped cell had done."""
    if not cell.running:
        return "while building the state"
    if math.isnan(cell.cold_ms):
        return f"built in {cell.setup_s:.0f} s, during the cold pass"
    return f"after the cold pass and {len(cell.churn_ms)} churn pass(es)"


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.1f}"


def table(cells: list[Cell]) -> str:
    """The printed table: one row a cell (times in ms: wall, and this process's CPU);
    a stopped cell shows what it measured and says where it stopped."""
    head = (
        f"{'nodes':>6} {'GPUs':>7} {'pending':>7} {'running':>7} | {'cold':>9} {'cold cpu':>9}"
        f" {'starts/preempts':>15} | {'churn p50':>9} {'p99':>9} {'p50 cpu':>9} {'passes':>6}"
        f" {'decided':>7} | {'peak MiB':>8} {'setup s':>7}"
    )
    lines = [head, "-" * len(head)]
    for c in cells:
        gpus = c.nodes * GPUS_PER_NODE
        if not c.running:
            lines.append(f"{c.nodes:>6,} {gpus:>7,} {c.pending:>7,}  {c.error}")
            continue
        lines.append(
            f"{c.nodes:>6,} {gpus:>7,} {c.pending:>7,} {c.running:>7,} | {_ms(c.cold_ms):>9}"
            f" {_ms(c.cold_cpu_ms):>9} {f'{c.cold_starts:,}/{c.cold_preempts:,}':>15} |"
            f" {_ms(c.p50):>9} {_ms(c.p99):>9} {_ms(c.p50_cpu):>9} {len(c.churn_ms):>6}"
            f" {c.churn_decisions:>7,.0f} | {c.peak_mib:>8,.0f} {c.setup_s:>7,.1f}"
        )
        if c.error:
            lines.append(f"{'':>6} ^ {c.error}")
    return "\n".join(lines)


def _crossing(cells: list[Cell], value: Callable[[Cell], float]) -> str:
    """Between which node counts a measure crosses the line, at one pending size
    (log-log interpolation between the two measured cells around it)."""
    measured = sorted((c for c in cells if not math.isnan(value(c))), key=lambda c: c.nodes)
    if not measured:
        return "not measured"
    if value(measured[0]) > LINE_MS:
        return f"over already at {measured[0].nodes:,} nodes"
    for low, high in itertools.pairwise(measured):
        if value(high) > LINE_MS >= value(low):
            slope = math.log(value(high) / value(low)) / math.log(high.nodes / low.nodes)
            at = low.nodes * (LINE_MS / value(low)) ** (1 / slope)
            return f"between {low.nodes:,} and {high.nodes:,} nodes (~{at:,.0f} by log-log)"
    return f"under up to {measured[-1].nodes:,} nodes"


def crossings(cells: list[Cell]) -> list[str]:
    """Where each measure crosses the 100 ms line, by pending size."""
    lines = []
    measures: tuple[tuple[str, Callable[[Cell], float]], ...] = (
        ("cold pass", lambda c: c.cold_ms),
        ("churn p50", lambda c: c.p50),
        ("churn p99", lambda c: c.p99),
        ("churn p50 cpu", lambda c: c.p50_cpu),
    )
    for pending in sorted({c.pending for c in cells}):
        row = [c for c in cells if c.pending == pending]
        where = "; ".join(f"{label} {_crossing(row, value)}" for label, value in measures)
        lines.append(f"{LINE_MS:g} ms line, {pending:,} pending: {where}")
    return lines


def profile(nodes: int, pending: int, seed: int, top: int) -> None:
    """cProfile the cold pass and the third churn pass of one cell (top functions)."""
    scheduler, work = build(nodes, pending, seed)
    for label, rounds in (("cold pass", 0), ("churn pass", 3)):
        now = 0.0
        for _ in range(rounds):
            now += INTERVAL_S
            _churn(scheduler, work, now)
            if _ < rounds - 1:
                scheduler.schedule(now)
        gc.collect()
        profiler = cProfile.Profile()
        profiler.enable()
        scheduler.schedule(now if rounds else 0.0)
        profiler.disable()
        print(f"\n== {label}: {nodes:,} nodes x {pending:,} pending (cProfile, by own time) ==")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(top)
        print(f"== {label}: by cumulative time ==")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(top)


def _sizes(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v.replace("_", "")) for v in text.split(",") if v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated counts") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give counts >= 1")
    return values


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=_sizes, default=FULL_NODES, help="e.g. 2000,10000")
    parser.add_argument("--pending", type=_sizes, default=FULL_PENDING, help="e.g. 10000")
    parser.add_argument("--passes", type=int, default=50, help="churn passes per cell (50)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="2k nodes x 10k pending, 5 passes")
    parser.add_argument(
        "--budget-s", type=float, default=120.0, help="wall time for a cell's churn passes"
    )
    parser.add_argument(
        "--cell-timeout-s", type=float, default=900.0, help="kill a cell after this long"
    )
    parser.add_argument("--max-gib", type=float, default=12.0, help="address space per cell")
    parser.add_argument("--profile", action="store_true", help="cProfile the first cell")
    parser.add_argument("--top", type=int, default=25, help="functions --profile prints")
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.pending, args.passes = (2000,), (10000,), 5
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if args.cell:  # a child: one cell, a JSON line
        limit = int(args.max_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        nodes, pending = (int(v) for v in args.cell.split("x"))
        measure(nodes, pending, args.passes, args.seed, args.budget_s, _print_cell)
        return 0
    if args.profile:
        profile(args.nodes[0], args.pending[0], args.seed, args.top)
        return 0
    print(
        f"default profile ({DEFAULT_PROFILE}, live build), Scheduler.schedule(now), ms;"
        f" {GPUS_PER_NODE} GPUs a node; churn: every {INTERVAL_S:g} s 1% of running jobs"
        f" end and as many arrive; {args.passes} churn passes (at most {args.budget_s:g} s"
        f" of them) per cell; {time.strftime('%Y-%m-%d')}",
        flush=True,
    )
    cells = []
    for nodes in args.nodes:
        for pending in args.pending:
            cell = _run_cell(nodes, pending, args)
            cells.append(cell)
            print("\n".join(table([cell]).splitlines()[2:]), flush=True)
    print()
    print(table(cells))
    for line in crossings(cells):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

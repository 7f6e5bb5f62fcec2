"""How often N schedulers deciding at once collide, on a real trace (issue 20).

Run with ``make bench-sharded`` or::

    python bench/sharded_conflicts.py --trace philly --shards 1,2,4,8

Needs ``ILUCID_TRACE_DIR``. Replays the trace as ``ilucid simulate --policy
ilucid`` does (the trace's cluster size convention, walk-forward estimates,
the Lucid workload profiles when ``ILUCID_PROFILE_DIR`` or ``profiles`` beside
the traces exists), but with N copies of the default profile's core, each
owning the jobs whose id hashes to it, all seeing the whole cluster (see
:mod:`ilucid.studies.sharded`). Two modes per N:

* ``optimistic``: every scheduler decides on the same snapshot, commits are
  serialized in a random (seeded) order, a start whose GPUs were taken by an
  earlier commit is refused and its scheduler retries in another round;
* ``locked``: each scheduler decides only after the commits before it (one
  lock from snapshot to commit): no conflict, the same split of the jobs. The
  difference to ``optimistic`` is what conflicts cost; the difference of
  ``locked`` to N = 1 is what splitting the decisions costs.

Each mode runs with the default profile unchanged in every scheduler (its
re-plan hands out the whole cluster's GPUs to its own jobs), and with
``+reach`` (:class:`ilucid.studies.sharded.ReachableDefault`: it re-plans within
the free GPUs and its own jobs'); ``--capacity`` picks one (``reachable`` by
default). On two shared cores the default run takes about an hour on Philly,
most of it N = 8; the unchanged profile's N = 4 runs take about 20 minutes
each (docs/scaling.md says why).

Printed per run: passes in which some scheduler claimed GPUs, claims,
conflicts (refused claims), the conflict rate, the share of such passes with a
conflict, the mean extra rounds per pass, the most rounds a pass took, the
modelled decision latency of a pass (the slowest scheduler of each round,
summed; the locked mode sums every scheduler), mean and p99 JCT, preemptions
(those the replay carried out), the preemptions committed beside a refused start
("stranded": GPUs freed for a job that then did not start there), and the
replay's wall time.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from ilucid.core import Cluster, JobSpec, make_policy
from ilucid.core.placement import never_placeable
from ilucid.estimators.profiles import profile_dir
from ilucid.sim.estimates import WalkForwardEstimates
from ilucid.sim.lucid_world import LucidWorld
from ilucid.sim.metrics import percentile
from ilucid.studies.sharded import ReachableDefault, ShardStats, simulate_sharded
from ilucid.traces import DEFAULT_LOAD, cluster_for_load, load_trace, trace_dir


@dataclass(frozen=True)
class Row:
    shards: int
    mode: str
    stats: ShardStats
    mean_jct: float
    p99_jct: float
    preemptions: int
    wall_s: float


def _load(name: str, limit: int | None) -> tuple[list[JobSpec], Cluster]:
    """The jobs and cluster ``ilucid simulate --trace NAME`` would replay."""
    trace = load_trace(name).limit(limit)
    cluster = trace.cluster or cluster_for_load(trace.jobs, DEFAULT_LOAD, 8)
    refused = never_placeable(trace.jobs, cluster)
    return [j for j in trace.jobs if j.id not in refused], cluster


def run(
    jobs: list[JobSpec], cluster: Cluster, shards: int, seed: int, locked: bool, reachable: bool
) -> Row:
    annotator = WalkForwardEstimates(jobs)
    profiles = profile_dir()
    world = LucidWorld.from_directory(profiles, annotator) if profiles is not None else None
    began = time.perf_counter()
    result, stats = simulate_sharded(
        jobs,
        cluster,
        ReachableDefault if reachable else lambda: make_policy("ilucid"),
        shards,
        seed=seed,
        annotator=annotator,
        world=world,
        concurrent=not locked,
    )
    wall = time.perf_counter() - began
    jcts = sorted(r.jct for r in result.records)
    return Row(
        shards,
        ("locked" if locked else "optimistic") + ("+reach" if reachable else ""),
        stats,
        sum(jcts) / len(jcts),
        percentile(jcts, 99),
        sum(r.preemptions for r in result.records),
        wall,
    )


def table(rows: list[Row]) -> str:
    head = (
        f"{'N':>2} {'mode':>16} {'passes':>7} {'claims':>7} {'conflicts':>9} {'rate':>6}"
        f" {'passes w/ c.':>12} {'extra rnd':>9} {'max rnd':>7} {'lat p50 ms':>10}"
        f" {'lat p99 ms':>10} {'mean JCT s':>10} {'p99 JCT s':>10} {'preempt':>7}"
        f" {'stranded':>8} {'wall s':>6}"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        s = row.stats
        latency = sorted(s.latency_s)
        share = s.passes_with_conflict / s.passes if s.passes else 0.0
        lines.append(
            f"{row.shards:>2} {row.mode:>16} {s.passes:>7,} {s.claims:>7,} {s.conflicts:>9,}"
            f" {s.conflict_rate:>6.1%} {share:>12.1%} {s.extra_rounds:>9.3f}"
            f" {max(s.rounds, default=0):>7} {percentile(latency, 50) * 1000:>10.2f}"
            f" {percentile(latency, 99) * 1000:>10.2f} {row.mean_jct:>10,.0f}"
            f" {row.p99_jct:>10,.0f} {row.preemptions:>7,} {s.stranded_preemptions:>8,}"
            f" {row.wall_s:>6.0f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", default="philly", help="a trace name or file (philly)")
    parser.add_argument("--shards", default="1,2,4,8", help="scheduler counts (1,2,4,8)")
    parser.add_argument("--seed", type=int, default=0, help="commit order seed")
    parser.add_argument("--limit", type=int, default=None, help="first N jobs only")
    parser.add_argument("--no-locked", action="store_true", help="skip the locked baseline")
    parser.add_argument(
        "--capacity",
        choices=("cluster", "reachable", "both"),
        default="reachable",
        help="each scheduler re-plans over the whole cluster (the profile unchanged),"
        " over the GPUs it can reach (free + its own; the default), or both",
    )
    args = parser.parse_args(argv)
    if trace_dir() is None:
        print("bench/sharded_conflicts.py needs ILUCID_TRACE_DIR", file=sys.stderr)
        return 2
    counts = [int(v) for v in args.shards.split(",") if v]
    jobs, cluster = _load(args.trace, args.limit)
    print(
        f"{args.trace}: {len(jobs):,} jobs on {len(cluster)} nodes ({cluster.total_gpus:,}"
        f" GPUs); default profile (replay cadence: re-plan on 60 s boundaries) in every"
        f" scheduler; jobs split by crc32(id) mod N; commit order seed {args.seed};"
        f" workload profiles: {'yes' if profile_dir() else 'none'}; {time.strftime('%Y-%m-%d')}",
        flush=True,
    )
    rows: list[Row] = []
    variants = {"cluster": (False,), "reachable": (True,), "both": (False, True)}[args.capacity]
    for reachable in variants:
        for shards in counts:
            if shards == 1 and reachable and len(variants) > 1:
                continue  # one scheduler reaches every GPU: the same replay as above
            for locked in (False, True) if shards > 1 and not args.no_locked else (False,):
                rows.append(run(jobs, cluster, shards, args.seed, locked, reachable))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A synthetic trace drawn from published GPU-cluster distributions, at a stated load.

For runs without real traces (``ilucid demo``, ``ilucid simulate --trace
synthetic``). The shapes follow two published characterisations, with the
numbers fitted to the public traces themselves (Philly in RFold's
one-row-per-job conversion, 111,549 jobs over 129 days; the Microsoft ITP
clusters) where the papers give only a figure:

- Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN
  Training Workloads", USENIX ATC'19 (Microsoft Philly);
- Hu et al., "Characterization and Prediction of Deep Learning Workloads in
  Large-Scale GPU Datacenters", SC'21 (SenseTime Helios).

What is drawn:

- GPUs per job (``GPU_MIX``): most jobs use one GPU (Philly 87%, four of the
  five Microsoft ITP clusters 76-96%; we take 80%), then 2, 4 and 8 GPUs and a
  tail of 16 and 32 (Philly: 0.8% and 0.2%). The few multi-GPU jobs hold
  most of the GPU time (8-GPU jobs alone: Philly 49%, here ~60%).
- Duration: log-normal per GPU count (``DURATION_MEDIAN_S``, sigma
  ``DURATION_SIGMA``). Medians as in Philly: 20 minutes for one GPU, 2 h for
  4, 3 h for 8 and 16, 1 h for 32. Sigma 1.6 lies within the ITP clusters'
  0.8-1.9, below Philly's 2.3-3.1 (whose tail, weeks long, no few-week window
  holds): a heavy tail of days, cut at ``MAX_DURATION_S`` (7 days).
- Arrivals: a Poisson process whose rate follows the working day: peak at
  15:00, 3:1 peak to trough (Philly's hour-of-day counts: 8,148 vs 2,673),
  and half the rate on two weekend days (Philly: ~9,000 vs ~19,000 per day of
  the week).

The load is exact, not approximate: the cluster has ``nodes`` x
``gpus_per_node`` GPUs and the arrival window is stretched so that the offered
GPU-time divided by (cluster GPUs x first-to-last submission span) equals
``load``. As in the Philly trace (where every job ends within 64 s of the last
submission), every job could end by a minute after the last submission if it
started when submitted: a job whose duration would overrun swaps its (GPUs,
duration) with an earlier job's, which keeps both distributions and the total
GPU-time exactly. So a replay's measured utilisation (busy GPU-seconds over
cluster GPUs x makespan) stays near the stated load unless the policy itself
lets the queue grow (fifo at 0.85 measures 0.79-0.85 over 24 seeds).

It is a stand-in for trying the tool, not evidence about any real cluster.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence

from ilucid.core import Cluster, JobSpec
from ilucid.traces.formats import Trace
from ilucid.traces.resolve import DEFAULT_LOAD

__all__ = [
    "DURATION_MEDIAN_S",
    "DURATION_SIGMA",
    "END_SLACK_S",
    "GPU_MIX",
    "MAX_DURATION_S",
    "MIN_DURATION_S",
    "WINDOW_DAYS",
    "arrival_rate",
    "offered_load",
    "synthetic_trace",
]

#: (GPUs, share of jobs).
GPU_MIX: tuple[tuple[int, float], ...] = (
    (1, 0.80),
    (2, 0.04),
    (4, 0.06),
    (8, 0.09),
    (16, 0.008),
    (32, 0.002),
)
#: Median duration (seconds) of a job of this many GPUs.
DURATION_MEDIAN_S: dict[int, float] = {
    1: 1200.0,
    2: 3600.0,
    4: 7200.0,
    8: 10800.0,
    16: 10800.0,
    32: 3600.0,
}
DURATION_SIGMA = 1.6
MIN_DURATION_S = 10.0
MAX_DURATION_S = 7 * 86400.0
#: Jobs could end at most this long after the last submission (Philly: 64 s).
END_SLACK_S = 60.0
#: Default submission window: long enough that the 7-day tail fits inside it.
WINDOW_DAYS = 28.0

_DAY_S = 86400.0
_PEAK_HOUR = 15.0
_AMPLITUDE = 0.5  # rate (1 + 0.5 cos): 3:1 peak to trough
_WEEKEND_FACTOR = 0.5  # days 5 and 6 of every week
_MAX_RATE = 1.0 + _AMPLITUDE


def arrival_rate(t: float) -> float:
    """Relative submission rate at ``t`` seconds (t = 0 is Monday 00:00), at most 1.5."""
    hour = (t % _DAY_S) / 3600.0
    daily = 1.0 + _AMPLITUDE * math.cos(2.0 * math.pi * (hour - _PEAK_HOUR) / 24.0)
    weekend = int(t // _DAY_S) % 7 >= 5
    return daily * (_WEEKEND_FACTOR if weekend else 1.0)


def offered_load(jobs: Sequence[JobSpec], cluster_gpus: int) -> float:
    """Offered GPU-time over cluster GPUs x first-to-last submission span."""
    work = sum(j.num_gpus * j.duration for j in jobs)
    span = jobs[-1].submit_time - jobs[0].submit_time
    return work / (cluster_gpus * span) if span > 0 else math.inf


def _sizes_and_durations(rng: random.Random, count: int) -> list[tuple[int, float]]:
    sizes = [g for g, _ in GPU_MIX]
    weights = [w for _, w in GPU_MIX]
    pairs: list[tuple[int, float]] = []
    for gpus in rng.choices(sizes, weights, k=count):
        drawn = math.exp(rng.gauss(math.log(DURATION_MEDIAN_S[gpus]), DURATION_SIGMA))
        pairs.append((gpus, float(round(min(max(drawn, MIN_DURATION_S), MAX_DURATION_S)))))
    return pairs


def _arrivals(rng: random.Random, count: int, span: float) -> list[float]:
    """``count`` sorted submission times from 0 to exactly ``span``, at the diurnal rate.

    Given their number, a Poisson process's arrivals are independent draws from
    its rate's shape; each is drawn by rejection against the peak rate.
    """
    inner: list[float] = []
    while len(inner) < count - 2:
        t = rng.uniform(0.0, span)
        if rng.random() * _MAX_RATE <= arrival_rate(t):
            inner.append(float(math.floor(t)))
    return [0.0, *sorted(inner), span][:count] if count > 1 else [0.0]


def _fit_window(rng: random.Random, times: list[float], pairs: list[tuple[int, float]]) -> None:
    """Swap the work of jobs that would end after the window with an earlier job's.

    The window closes ``END_SLACK_S`` after the last submission, which no job
    of at least ``MIN_DURATION_S`` could otherwise fit.
    """
    end = times[-1] + END_SLACK_S
    for i in range(len(times) - 1, -1, -1):
        if times[i] + pairs[i][1] <= end:
            continue
        # a partner j submitted early enough to hold job i's work, whose own work fits at i
        last = bisect.bisect_right(times, end - pairs[i][1]) - 1
        for _ in range(1000 if last >= 0 else 0):
            j = rng.randint(0, last)
            if times[i] + pairs[j][1] <= end:
                pairs[i], pairs[j] = pairs[j], pairs[i]
                break


def _default_nodes(
    pairs: Sequence[tuple[int, float]], load: float, gpus_per_node: int, days: float
) -> int:
    """Nodes so that the work fills a ``days`` window at ``load`` (at least the largest job)."""
    work = sum(g * d for g, d in pairs)
    nodes = round(work / (load * days * _DAY_S * gpus_per_node))
    largest = max(g for g, _ in pairs)
    return max(nodes, math.ceil(largest / gpus_per_node), 1)


def synthetic_trace(
    jobs: int = 5000,
    seed: int = 0,
    load: float = DEFAULT_LOAD,
    nodes: int | None = None,
    gpus_per_node: int = 8,
    days: float = WINDOW_DAYS,
) -> Trace:
    """``jobs`` jobs offering exactly ``load`` of the trace's own cluster; same seed, same trace.

    Without ``nodes``, the cluster is sized so the window lasts about ``days``
    (it never holds less than the largest job).
    """
    if jobs < 2:
        raise ValueError(f"a synthetic trace needs at least 2 jobs, got {jobs}")
    if not (math.isfinite(load) and load > 0):
        raise ValueError(f"load must be a number > 0, got {load}")
    rng = random.Random(seed)
    pairs = _sizes_and_durations(rng, jobs)
    nodes = nodes if nodes is not None else _default_nodes(pairs, load, gpus_per_node, days)
    cluster = Cluster.homogeneous(nodes, gpus_per_node)
    pairs = [(min(g, cluster.total_gpus), d) for g, d in pairs]
    work = sum(g * d for g, d in pairs)
    times = _arrivals(rng, jobs, work / (cluster.total_gpus * load))
    _fit_window(rng, times, pairs)
    specs = [
        JobSpec(f"syn-{index:06d}", times[index], gpus, duration)
        for index, (gpus, duration) in enumerate(pairs)
    ]
    source = f"synthetic(jobs={jobs}, seed={seed}): load {load:g} on {nodes} x {gpus_per_node} GPUs"
    return Trace("synthetic", specs, source, cluster, synthetic=True)

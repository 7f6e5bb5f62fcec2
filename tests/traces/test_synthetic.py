"""The synthetic trace: published shapes, an exact stated load, and a replay that shows it."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from ilucid.cli import main
from ilucid.core import JobSpec, make_policy
from ilucid.sim.engine import simulate
from ilucid.sim.metrics import percentile, summarize
from ilucid.traces import synthetic_trace
from ilucid.traces.synthetic import END_SLACK_S, arrival_rate

HOUR = 3600.0
DAY = 86400.0


def _offered(jobs: Sequence[JobSpec], gpus: int) -> float:
    """Offered GPU-time over cluster GPUs x first-to-last submission span."""
    work = sum(j.num_gpus * j.duration for j in jobs)
    return work / (gpus * (jobs[-1].submit_time - jobs[0].submit_time))


@pytest.mark.parametrize("load", [0.6, 0.85])
def test_the_offered_load_is_the_stated_load(load: float) -> None:
    trace = synthetic_trace(jobs=3000, seed=7, load=load)
    assert trace.cluster is not None
    assert _offered(trace.jobs, trace.cluster.total_gpus) == pytest.approx(load, rel=1e-9)


@pytest.mark.parametrize("load", [0.6, 0.85])
def test_fifo_measures_the_stated_load_within_ten_percent(load: float) -> None:
    """Busy GPU-seconds over cluster GPUs x makespan, as summary.json reports it."""
    trace = synthetic_trace(load=load)
    assert trace.cluster is not None
    util = summarize(simulate(trace.jobs, trace.cluster, make_policy("fifo")))["gpu_util"]
    print(f"stated load {load}: fifo measures {util:.3f}")
    assert abs(util - load) <= 0.10 * load  # relative 10%, hence also within 0.085 absolute


def test_the_demo_trace_separates_fifo_from_srtf(tmp_path: Path) -> None:
    """What `ilucid demo` replays without traces: 5,000 jobs, seed 0, its own cluster."""
    out = str(tmp_path)
    code = main(["simulate", "--trace", "synthetic", "--policy", "fifo,srtf", "--out", out])
    assert code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    ratio = summary["fifo"]["avg_jct"] / summary["srtf"]["avg_jct"]
    print(f"fifo / srtf mean JCT: {ratio:.1f}x")
    assert ratio >= 2.0
    assert summary["fifo"]["jobs"] == 5000
    assert abs(summary["fifo"]["gpu_util"] - 0.85) <= 0.085


def test_gpu_counts_and_durations_have_the_published_shape() -> None:
    jobs = synthetic_trace(jobs=20000, seed=3).jobs
    single = sum(j.num_gpus == 1 for j in jobs) / len(jobs)
    assert 0.70 <= single <= 0.85  # Philly 87%, ITP 76-96%, Helios mostly single-GPU
    assert {j.num_gpus for j in jobs} <= {1, 2, 4, 8, 16, 32}
    assert any(j.num_gpus >= 16 for j in jobs)
    durations = sorted(j.duration for j in jobs)
    assert 10 * 60 <= percentile(durations, 50) <= HOUR  # median: minutes to an hour
    assert percentile(durations, 99) >= DAY  # a tail of days
    assert durations[-1] <= 7 * DAY
    work = sum(j.num_gpus * j.duration for j in jobs)
    multi = sum(j.num_gpus * j.duration for j in jobs if j.num_gpus > 1)
    assert multi / work >= 0.6  # the few multi-GPU jobs hold most of the GPU time
    # one-GPU jobs are shorter than 8-GPU ones, as in Philly (20 min vs 3.5 h)
    one = sorted(j.duration for j in jobs if j.num_gpus == 1)
    eight = sorted(j.duration for j in jobs if j.num_gpus == 8)
    assert percentile(eight, 50) > 3 * percentile(one, 50)


def test_arrivals_follow_the_working_day() -> None:
    jobs = synthetic_trace(jobs=20000, seed=5).jobs
    scale = jobs[-1].submit_time / (28 * DAY)  # the window is stretched to fit the load
    assert 0.5 < scale < 2.0
    hours = [int(j.submit_time % DAY // HOUR) for j in jobs]
    afternoon = sum(12 <= h < 18 for h in hours)
    night = sum(0 <= h < 6 for h in hours)
    assert afternoon > 2 * night  # the rate's 3:1 peak to trough, averaged over 6 hours
    assert arrival_rate(15 * HOUR) == pytest.approx(1.5)
    assert arrival_rate(3 * HOUR) == pytest.approx(0.5)
    assert arrival_rate(5 * DAY + 15 * HOUR) == pytest.approx(0.75)  # Saturday


def test_every_job_could_end_within_the_window() -> None:
    jobs = synthetic_trace(jobs=5000, seed=11).jobs
    end = jobs[-1].submit_time + END_SLACK_S  # Philly: every job ends within 64 s of the last
    assert END_SLACK_S <= 60
    assert all(j.submit_time + j.duration <= end for j in jobs)
    assert all(a.submit_time <= b.submit_time for a, b in itertools.pairwise(jobs))


def test_the_same_seed_gives_the_same_trace() -> None:
    first = synthetic_trace(jobs=2000, seed=4)
    again = synthetic_trace(jobs=2000, seed=4)
    other = synthetic_trace(jobs=2000, seed=5)
    assert first.jobs == again.jobs
    assert first.cluster == again.cluster
    assert first.jobs != other.jobs


def test_a_given_cluster_holds_every_job_and_the_load_is_still_exact() -> None:
    trace = synthetic_trace(jobs=400, seed=1, load=0.7, nodes=2, gpus_per_node=8)
    assert trace.cluster is not None and trace.cluster.total_gpus == 16
    assert max(j.num_gpus for j in trace.jobs) <= 16
    assert _offered(trace.jobs, 16) == pytest.approx(0.7, rel=1e-9)
    assert "load 0.7 on 2 x 8 GPUs" in trace.source


@pytest.mark.parametrize(("jobs", "load"), [(1, 0.85), (100, 0.0), (100, -1.0), (100, math.nan)])
def test_impossible_requests_are_refused(jobs: int, load: float) -> None:
    with pytest.raises(ValueError):
        synthetic_trace(jobs=jobs, load=load)

"""Hand-computed schedules for every profile in ``ilucid.core.PROFILES``.

Each test replays 3-6 jobs on 1-2 nodes through ``ilucid.sim.engine.simulate`` and
asserts, per job, the exact JCT (end - submit), first start and preemption
count. The comment above each expectation derives it from the semantics in
the policy modules' docstrings, so a reader can check it with pencil and paper.

Notation: ``x(t=10, 2g, 100s)`` is job ``x`` submitted at t=10 asking for 2 GPUs
with a true duration of 100 s. ``free=N`` is the number of free GPUs after the
step described. Restore overhead (``RestoreOverhead``) is 40 s for jobs with
<= 8 GPUs and 60 s above, unless a test configures otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pytest

from ilucid.core import (
    PROFILES,
    Cluster,
    JobSpec,
    Node,
    Policy,
    ProfileReport,
    RestoreOverhead,
    SchedulerConfig,
    make_policy,
)
from ilucid.core.framework import BuildContext
from ilucid.core.policies import tiresias_overrides
from ilucid.core.policies.lucid import LucidConfig, LucidPolicy
from ilucid.core.policies.preemptive import estimate_srtf, tiresias
from ilucid.sim.engine import simulate
from ilucid.sim.replay_types import JobRecord, World

#: (JCT, first start, preemptions) per job id.
Expected = Mapping[str, tuple[float, float, int]]


def job(job_id: str, submit: float, gpus: int, duration: float) -> JobSpec:
    return JobSpec(job_id, submit, gpus, duration)


def run(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    policy: str | Policy,
    config: SchedulerConfig | None = None,
) -> dict[str, JobRecord]:
    chosen = make_policy(policy) if isinstance(policy, str) else policy
    result = simulate(jobs, cluster, chosen, config=config)
    assert len(result.records) == len(jobs)
    return {r.id: r for r in result.records}


def assert_outcome(records: Mapping[str, JobRecord], expected: Expected) -> None:
    assert set(records) == set(expected)
    actual = {
        job_id: (r.end - r.submit, r.first_start, r.preemptions) for job_id, r in records.items()
    }
    assert actual == dict(expected)


# A shared 1x4-GPU scenario for the four non-preemptive queue policies.
#   a(t=0, 2g, 100s)  b(t=10, 4g, 50s)  c(t=20, 1g, 30s)  d(t=30, 2g, 40s)  e(t=35, 1g, 60s)
ONE_BY_FOUR = Cluster.homogeneous(1, 4)
QUEUE_JOBS = [
    job("a", 0, 2, 100),
    job("b", 10, 4, 50),
    job("c", 20, 1, 30),
    job("d", 30, 2, 40),
    job("e", 35, 1, 60),
]


# -- FIFO ------------------------------------------------------------------------
def test_fifo_head_of_line_blocking() -> None:
    # t=0   a starts (free=2), ends 100.
    # t=10  b needs 4, free=2: blocks the queue.
    # t=20  c (1g) would fit but waits behind b (head-of-line blocking); so do d, e.
    # t=100 a ends, free=4: b starts (free=0), ends 150; c does not fit: stop.
    # t=150 b ends, free=4: c starts (free=3) ends 180, d starts (free=1) ends 190,
    #       e starts (free=0) ends 210.
    # JCT: a 100-0=100, b 150-10=140, c 180-20=160, d 190-30=160, e 210-35=175.
    records = run(QUEUE_JOBS, ONE_BY_FOUR, "fifo")
    assert_outcome(
        records,
        {
            "a": (100, 0, 0),
            "b": (140, 100, 0),
            "c": (160, 150, 0),
            "d": (160, 150, 0),
            "e": (175, 150, 0),
        },
    )


def test_fifo_multi_node_gang_job_spans_two_nodes() -> None:
    # 2x8 GPUs.  a(t=0, 4g, 100s)  b(t=10, 16g, 50s)  c(t=20, 8g, 30s)
    # t=0   a fits one node: best fit among equally free nodes is node0 -> node0:4.
    # t=10  b needs 16, free=12: blocks.  t=20 c (8g, would fit node1) waits behind b.
    # t=100 a ends; b takes both wholly free nodes -> node0:8+node1:8, ends 150.
    # t=150 c starts on node0 (best fit, first in node order), ends 180.
    # JCT: a 100, b 150-10=140, c 180-20=160.
    cluster = Cluster.homogeneous(2, 8)
    jobs = [job("a", 0, 4, 100), job("b", 10, 16, 50), job("c", 20, 8, 30)]
    records = run(jobs, cluster, "fifo")
    assert_outcome(records, {"a": (100, 0, 0), "b": (140, 100, 0), "c": (160, 150, 0)})
    assert records["a"].nodes == "node0:4"
    assert records["b"].nodes == "node0:8+node1:8"
    assert records["c"].nodes == "node0:8"


# -- SJF -------------------------------------------------------------------------
def test_sjf_orders_by_true_duration_and_blocks_at_head() -> None:
    # Queue order is by true duration: c(30) < d(40) < b(50) < e(60).
    # t=0   a starts (free=2), ends 100.
    # t=10  queue [b]: b needs 4, free=2: blocks.
    # t=20  queue [c, b]: c fits (free=1), ends 50; b blocks.
    # t=30  queue [d, b]: d needs 2, free=1: blocks.
    # t=35  queue [d, b, e]: d blocks, so e (1g, would fit) waits: head-of-line blocking.
    # t=50  c ends, free=2: d starts (free=0), ends 90; b blocks.
    # t=90  d ends, free=2: b (4g) blocks; e waits behind b.
    # t=100 a ends, free=4: b starts (free=0), ends 150; e blocks.
    # t=150 b ends: e starts, ends 210.
    # JCT: a 100, b 150-10=140, c 50-20=30, d 90-30=60, e 210-35=175.
    records = run(QUEUE_JOBS, ONE_BY_FOUR, "sjf")
    assert_outcome(
        records,
        {
            "a": (100, 0, 0),
            "b": (140, 100, 0),
            "c": (30, 20, 0),
            "d": (60, 50, 0),
            "e": (175, 150, 0),
        },
    )


# -- FIFO with EASY backfilling -----------------------------------------------------
def test_fifo_backfill_beats_plain_fifo_without_delaying_the_head() -> None:
    # Same jobs as test_fifo_head_of_line_blocking.
    # t=0   a starts (free=2), expected end 100.
    # t=10  b (head) needs 4, free=2: blocks. Shadow: 2 free + a's 2 at t=100 -> t=100,
    #       spare 0.
    # t=20  c: 1g <= free 2 and 20+30=50 <= shadow 100 -> backfilled, ends 50 (free=1).
    # t=30  d: 2g > free 1: skipped.
    # t=35  shadow still 100 (1 free + c's 1 at 50 + a's 2 at 100), spare 0.
    #       d: 2g > free 1: skipped.  e: 1g fits, 35+60=95 <= 100 -> backfilled, ends 95.
    # t=50  c ends, free=1: d (2g) still does not fit.
    # t=95  e ends, free=2: d fits now but 95+40=135 > shadow 100 and 2g > spare 0:
    #       not backfilled (it would delay b).
    # t=100 a ends, free=4: b starts on time, ends 150; d: free=0.
    # t=150 b ends: d starts, ends 190.
    # JCT: a 100, b 140 (as in FIFO), c 50-20=30 (FIFO: 160), d 190-30=160,
    #      e 95-35=60 (FIFO: 175).
    records = run(QUEUE_JOBS, ONE_BY_FOUR, "fifo-backfill")
    assert_outcome(
        records,
        {
            "a": (100, 0, 0),
            "b": (140, 100, 0),
            "c": (30, 20, 0),
            "d": (160, 150, 0),
            "e": (60, 35, 0),
        },
    )
    plain = run(QUEUE_JOBS, ONE_BY_FOUR, "fifo")
    assert records["c"].jct < plain["c"].jct
    assert records["e"].jct < plain["e"].jct
    assert records["b"].first_start == plain["b"].first_start  # the reservation held


def test_fifo_backfill_multi_node_head_keeps_its_reservation() -> None:
    # 2x8 GPUs, same jobs as test_fifo_multi_node_gang_job_spans_two_nodes.
    # t=0   a -> node0:4 (free 12), ends 100.
    # t=10  b (16g) blocks; shadow: 12 free + a's 4 at t=100 = 16 -> t=100, spare 0.
    # t=20  c: 8g <= 12 free, 20+30=50 <= 100 -> backfilled on node1 (the only node
    #       with 8 free), ends 50.
    # t=100 a ends; b takes node0:8+node1:8, ends 150.
    # JCT: a 100, b 140, c 50-20=30.
    cluster = Cluster.homogeneous(2, 8)
    jobs = [job("a", 0, 4, 100), job("b", 10, 16, 50), job("c", 20, 8, 30)]
    records = run(jobs, cluster, "fifo-backfill")
    assert_outcome(records, {"a": (100, 0, 0), "b": (140, 100, 0), "c": (30, 20, 0)})
    assert records["b"].nodes == "node0:8+node1:8"
    assert records["c"].nodes == "node1:8"


# -- SJF with EASY backfilling ------------------------------------------------------
# 1x4:  a(t=0, 3g, 100s)  b(t=10, 2g, 50s)  c(t=20, 1g, 200s)  d(t=30, 1g, 60s)
SPARE_JOBS = [
    job("a", 0, 3, 100),
    job("b", 10, 2, 50),
    job("c", 20, 1, 200),
    job("d", 30, 1, 60),
]


def test_sjf_backfill_uses_gpus_the_head_will_not_need() -> None:
    # t=0   a starts (free=1), expected end 100.
    # t=10  b (head) needs 2, free=1: blocks. Shadow: 1 free + a's 3 at t=100 = 4 ->
    #       t=100, spare 4-2=2.
    # t=20  SJF order [b(50), c(200)]: b blocks. c: 1g <= free 1, ends 220 > shadow,
    #       but 1g <= spare 2 -> backfilled on spare GPUs, ends 220 (free=0, spare=1).
    # t=30  order [b(50), d(60)]: b blocks; free=0, nothing to backfill.
    # t=100 a ends, free=3: b starts (free=1) ends 150; d starts (free=0) ends 160.
    # JCT: a 100, b 150-10=140, c 220-20=200, d 160-30=130.
    records = run(SPARE_JOBS, ONE_BY_FOUR, "sjf-backfill")
    assert_outcome(
        records,
        {"a": (100, 0, 0), "b": (140, 100, 0), "c": (200, 20, 0), "d": (130, 100, 0)},
    )


def test_sjf_without_backfill_on_the_spare_gpu_scenario() -> None:
    # Plain SJF on SPARE_JOBS, for contrast.
    # t=0   a starts (free=1).  t=10 b (2g) blocks.  t=20 order [b, c]: c waits behind b.
    # t=30  order [b(50), d(60), c(200)]: b blocks.
    # t=100 a ends, free=1+3=4: b starts (free=2) ends 150, d starts (free=1) ends 160,
    #       c starts (free=0) ends 300.
    # JCT: a 100, b 140, c 300-20=280 (backfill: 200), d 130.
    records = run(SPARE_JOBS, ONE_BY_FOUR, "sjf")
    assert_outcome(
        records,
        {"a": (100, 0, 0), "b": (140, 100, 0), "c": (280, 100, 0), "d": (130, 100, 0)},
    )
    backfilled = run(SPARE_JOBS, ONE_BY_FOUR, "sjf-backfill")
    assert backfilled["c"].jct < records["c"].jct
    assert backfilled["b"].first_start == records["b"].first_start  # reservation held


def test_sjf_backfill_respects_the_shadow_time() -> None:
    # QUEUE_JOBS under sjf-backfill: the same outcome as plain SJF, because every
    # candidate would delay the head's reservation.
    # t=30  head d (2g), free=1; shadow: c's 1 GPU at t=50 -> t=50, spare 0; b: 4g > free.
    # t=35  e: 1g fits, but 35+60=95 > shadow 50 and 1g > spare 0: not backfilled.
    # t=50  c ends: d starts, ends 90. free=0.
    # t=90  head b (4g), free=2; shadow: a's 2 at t=100 -> t=100, spare 0;
    #       e: 90+60=150 > 100 and 1g > spare 0: not backfilled.
    # t=100 b starts, ends 150.  t=150 e starts, ends 210.
    # JCT: a 100, b 140, c 30, d 60, e 175 (identical to SJF).
    records = run(QUEUE_JOBS, ONE_BY_FOUR, "sjf-backfill")
    assert_outcome(
        records,
        {
            "a": (100, 0, 0),
            "b": (140, 100, 0),
            "c": (30, 20, 0),
            "d": (60, 50, 0),
            "e": (175, 150, 0),
        },
    )


# -- SRTF ------------------------------------------------------------------------
# 1x4:  a(t=0, 4g, 100s)  b(t=10, 2g, 30s)  c(t=20, 2g, 200s)
SRTF_JOBS = [job("a", 0, 4, 100), job("b", 10, 2, 30), job("c", 20, 2, 200)]


@pytest.mark.parametrize(
    ("overhead", "expected"),
    [
        # Default overhead, 40 s (jobs of <= 8 GPUs).
        # t=0   a alone: starts, remaining 100.
        # t=10  order b(30, pending) < a(90, running). Quota 4: b takes 2, a (4g) does
        #       not fit the 2 left -> preempted, remaining 90+40=130. b starts, ends 40.
        # t=20  order b(20) < a(130) < c(200). Quota: b 2 (left 2); a 4g > 2 -> skipped,
        #       not blocking; c 2g -> starts, remaining 200.
        # t=40  b ends. Order a(130) < c(180). Quota: a 4 (left 0); c preempted,
        #       remaining 180+40=220. a starts, ends 40+130=170.
        # t=170 a ends: c starts, ends 170+220=390.
        # JCT: a 170, b 40-10=30, c 390-20=370.
        (None, {"a": (170, 0, 1), "b": (30, 10, 0), "c": (370, 20, 1)}),
        # Overhead configured to 10 s: a's remaining after t=10 is 90+10=100.
        # t=40  order a(100) < c(180): c preempted, remaining 190; a ends 40+100=140.
        # t=140 c starts, ends 140+190=330.
        # JCT: a 140, b 30, c 330-20=310.
        (
            RestoreOverhead(small=10.0, large=20.0),
            {"a": (140, 0, 1), "b": (30, 10, 0), "c": (310, 20, 1)},
        ),
    ],
    ids=["default-40s", "configured-10s"],
)
def test_srtf_preempts_for_shorter_remaining_time(
    overhead: RestoreOverhead | None, expected: Expected
) -> None:
    config = None if overhead is None else SchedulerConfig(overhead=overhead)
    records = run(SRTF_JOBS, ONE_BY_FOUR, "srtf", config=config)
    assert_outcome(records, expected)


def test_srtf_multi_node_job_pays_the_large_restore_overhead() -> None:
    # 2x8.  a(t=0, 16g, 100s)  b(t=10, 8g, 20s)  c(t=15, 8g, 300s)
    # t=0   a starts on node0:8+node1:8.
    # t=10  order b(20) < a(90). Quota 16: b 8 (left 8); a 16g > 8 -> preempted,
    #       remaining 90 + 60 (16 GPUs > 8: the large overhead) = 150.
    #       b starts on node0 (best fit, first in node order), ends 30.
    # t=15  order b(15) < a(150) < c(300). Quota: b 8 (left 8); a 16 > 8 skipped;
    #       c 8 -> starts on node1, remaining 300.
    # t=30  b ends. Order a(150) < c(285). Quota: a 16 (left 0); c preempted,
    #       remaining 285+40=325. a starts (node0:8+node1:8), ends 30+150=180.
    # t=180 a ends: c starts, ends 180+325=505.
    # JCT: a 180, b 30-10=20, c 505-15=490.
    cluster = Cluster.homogeneous(2, 8)
    jobs = [job("a", 0, 16, 100), job("b", 10, 8, 20), job("c", 15, 8, 300)]
    records = run(jobs, cluster, "srtf")
    assert_outcome(records, {"a": (180, 0, 1), "b": (20, 10, 0), "c": (490, 15, 1)})
    assert records["a"].nodes == "node0:8+node1:8"
    assert records["b"].nodes == "node0:8"
    assert records["c"].nodes == "node1:8"


# -- Tiresias --------------------------------------------------------------------
def test_tiresias_plans_only_at_interval_boundaries() -> None:
    # Default Tiresias: threshold 18000 GPU-s (never reached here), passes every 60 s.
    # 1x4.  a(t=10, 2g, 100s)  b(t=20, 2g, 50s)  c(t=70, 4g, 30s)
    # t=10, t=20  not a multiple of 60: nothing starts.
    # t=60  order (queue 0) a(submit 10) < b(submit 20): both start; a ends 160, b 110.
    # t=70  c arrives; next pass at t=120.
    # t=110 b ends (no pass until t=120).
    # t=120 order a (running, submit 10) < c (submit 70). Quota 4: a 2 (left 2);
    #       c 4g > 2 -> not started. a is not preempted: same queue, earlier submit.
    # t=160 a ends; next pass at t=180: c starts, ends 210.
    # JCT: a 160-10=150, b 110-20=90, c 210-70=140.
    jobs = [job("a", 10, 2, 100), job("b", 20, 2, 50), job("c", 70, 4, 30)]
    records = run(jobs, ONE_BY_FOUR, "tiresias")
    assert_outcome(records, {"a": (150, 60, 0), "b": (90, 60, 0), "c": (140, 180, 0)})


@pytest.mark.parametrize(
    "factory",
    [
        lambda: tiresias(thresholds=(200.0,), interval=60.0),
        lambda: make_policy("tiresias", BuildContext(overrides=tiresias_overrides(60.0, 200.0))),
    ],
    ids=["tiresias()", "make_policy"],
)
def test_tiresias_demotion_preempts(factory: Callable[[], Policy]) -> None:
    # Threshold 200 GPU-s, passes every 60 s. 1x4.
    # a(t=0, 4g, 300s)  b(t=30, 4g, 100s)  c(t=130, 1g, 50s)
    # t=0   pass (0 is a boundary): a starts.
    # t=30  b arrives; next pass t=60.
    # t=60  a attained 4*60=240 > 200 -> queue 1; b queue 0. Order b < a. Quota 4: b;
    #       a preempted (attained 240, remaining 300-60+40=280). b starts.
    # t=120 (b would cross 200 GPU-s at t=110; next boundary 120.) b attained 240 ->
    #       queue 1. Order in queue 1 by submit: a(0) < b(30). a starts (remaining 280);
    #       b preempted (attained 240, remaining 100-60+40=80).
    # t=130 c arrives; next pass t=180.
    # t=180 c queue 0 first: takes 1 (left 3); a (queue 1, 4g) > 3 -> preempted
    #       (attained 480, remaining 280-60+40=260); b (4g) > 3 skipped. c starts, ends 230.
    # t=230 c ends; next pass t=240: order a(0) < b(30): a starts, ends 240+260=500.
    # t=500 a ends; next pass t=540: b starts, ends 540+80=620.
    # JCT: a 500, b 620-30=590, c 230-130=100. Preemptions: a 2, b 1, c 0.
    jobs = [job("a", 0, 4, 300), job("b", 30, 4, 100), job("c", 130, 1, 50)]
    records = run(jobs, ONE_BY_FOUR, factory())
    assert_outcome(records, {"a": (500, 0, 2), "b": (590, 60, 1), "c": (100, 180, 0)})


# -- coverage of the registry -------------------------------------------------------
# -- QSSF ------------------------------------------------------------------------
def test_qssf_orders_by_estimate_times_gpus_not_by_true_duration() -> None:
    # 1x2 GPUs. Keys are estimate x GPUs: a 200, b 100, c 200, d 10.
    #   t=0   a (2g) starts, ends 100.
    #   t=100 queue d(10) < b(100) < c(200): d starts (1 GPU) 100-160; b needs 2,
    #         only 1 free: head-of-line blocking, c waits too.
    #   t=160 d ends; b starts 160-190.  t=190 c starts 190-230.
    # d's true duration (60) is longer than b's (30): the order comes from estimates.
    jobs = [
        JobSpec("a", 0, 2, 100, estimate=100),
        JobSpec("b", 1, 2, 30, estimate=50),
        JobSpec("c", 2, 1, 40, estimate=200),
        JobSpec("d", 3, 1, 60, estimate=10),
    ]
    records = run(jobs, Cluster.homogeneous(1, 2), "qssf")
    assert_outcome(
        records,
        {"a": (100, 0, 0), "d": (157, 100, 0), "b": (189, 160, 0), "c": (228, 190, 0)},
    )


# -- Lucid / ilucid ------------------------------------------------------------------
def test_lucid_profiles_small_jobs_first_and_counts_profiling_in_jct() -> None:
    # 4 nodes x 2 GPUs; the profiling pool is 1 node (node3: at most 25% of nodes).
    # Profile limit 100 s, leaving the profiler costs the 40 s restore overhead.
    #   t=0   a(1g) profiles on node3; b(2g) waits (node3 has 1 GPU left): smallest first.
    #   t=10  c(4g) cannot fit the 2-GPU pool but waits behind b in the profile queue.
    #   t=20  d(1g) sorts before b and profiles on node3's other GPU.
    #   t=50  a (50 s) and d (30 s) finish while profiling: done.
    #         b profiles 50-150; c moves to the main queue and takes node0+node1, 50-150.
    #   t=150 b leaves the profiler with 300-100=200 s left + 40 s restore -> node0,
    #         150-390. JCT 390 includes its 100 s of profiling.
    jobs = [
        JobSpec("a", 0, 1, 50, estimate=50),
        JobSpec("b", 0, 2, 300, estimate=1000),
        JobSpec("c", 10, 4, 100, estimate=100),
        JobSpec("d", 20, 1, 30, estimate=30),
    ]
    policy = LucidPolicy(LucidConfig(profile_limit_s=100, profiler_nodes=1))
    records = run(jobs, Cluster.homogeneous(4, 2), policy)
    assert_outcome(
        records,
        {"a": (50, 0, 0), "b": (390, 50, 0), "c": (140, 50, 0), "d": (30, 20, 0)},
    )
    assert (records["b"].profiled_s, records["b"].restores) == (100, 1)
    assert records["b"].nodes == "node3:2"  # its first run was on the profiling pool


class HalfSpeedPairs(World):
    def measure(self, spec: JobSpec, ran_s: float, now: float) -> ProfileReport:
        return ProfileReport(sharing_score=0, gpu_memory_gb=4.0, estimate=None)

    def pair_speed(self, a: JobSpec, b: JobSpec) -> tuple[float, float]:
        return 0.5, 0.5


def test_lucid_packs_light_jobs_and_slows_both() -> None:
    # 2 nodes x 1 GPU, profiler = node1 (share 0.5), profile limit 10 s, packing on.
    #   p1 profiles 0-10, then node0 from t=10 with 90+40=130 s of work.
    #   p2 profiles 10-20, then finds node0 busy: scores 0+0 <= 2, 4+4 GB fit -> packed.
    #   From t=20 both run at half speed: p1 has 120 s left -> ends 260;
    #   p2 has 130 s left: 120 s of it done by 260, the last 10 s alone -> ends 270.
    jobs = [JobSpec("p1", 0, 1, 100, estimate=100), JobSpec("p2", 0, 1, 100, estimate=200)]
    config = LucidConfig(profile_limit_s=10, profiler_nodes=1, profiler_max_share=0.5)
    result = simulate(jobs, Cluster.homogeneous(2, 1), LucidPolicy(config), world=HalfSpeedPairs())
    records = {r.id: r for r in result.records}
    assert_outcome(records, {"p1": (260, 0, 0), "p2": (270, 10, 0)})
    assert (records["p1"].packed, records["p2"].packed) == (0, 1)
    assert records["p2"].work_done == 100 + 40  # its own work plus one restore


def test_ilucid_serves_a_starving_job_that_lucid_keeps_skipping() -> None:
    # 1 node x 2 GPUs, no profiling. big (2g) keeps losing to cheaper 1-GPU jobs
    # under lucid (a job that does not fit is skipped). ilucid promotes any job
    # waiting >= 50 s to a FIFO lane served first.
    #   lucid:  s1 0-100, s2 2-102 (big skipped: 1 GPU free), s3 100-200 (its 10
    #           GPU-s beat big's 2,000); big needs both GPUs: 200-300.
    #   ilucid: at t=99 big (waited 98 s) is promoted; s3 waits behind it;
    #           big runs 102-202 once s1 and s2 end; s3 runs 202-302.
    jobs = [
        JobSpec("s1", 0, 1, 100, estimate=10),
        JobSpec("big", 1, 2, 100, estimate=1000),
        JobSpec("s2", 2, 1, 100, estimate=10),
        JobSpec("s3", 99, 1, 100, estimate=10),
    ]
    cluster = Cluster.homogeneous(1, 2)
    plain = run(jobs, cluster, LucidPolicy(LucidConfig(profile_limit_s=0)))
    assert_outcome(
        plain,
        {"s1": (100, 0, 0), "s2": (100, 2, 0), "s3": (101, 100, 0), "big": (299, 200, 0)},
    )
    aged = run(jobs, cluster, LucidPolicy(LucidConfig(profile_limit_s=0, starve_after_s=50)))
    assert_outcome(
        aged,
        {"s1": (100, 0, 0), "s2": (100, 2, 0), "big": (201, 102, 0), "s3": (203, 202, 0)},
    )


HAND_TESTED = {
    "fifo",
    "sjf",
    "fifo-backfill",
    "sjf-backfill",
    "srtf",
    "tiresias",
    "qssf",
    "lucid",
    "estimate-srtf",  # through estimate_srtf() below
    "ilucid",  # the default profile: tests/core/test_default_profile.py
    "tiered",  # and static-partition:N: tests/core/test_tiers.py
}


def test_every_registered_policy_has_hand_computed_cases() -> None:
    assert set(PROFILES) - {"static-partition"} == HAND_TESTED


class HeavyMemory(HalfSpeedPairs):
    def measure(self, spec: JobSpec, ran_s: float, now: float) -> ProfileReport:
        return ProfileReport(sharing_score=0, gpu_memory_gb=20.0, estimate=None)


def test_lucid_does_not_pack_when_memory_would_overflow() -> None:
    # As the packing case, but each job uses 20 GB of a 32 GB GPU: 40 GB do not fit,
    # so p2 waits for node0: p1 runs 10-140 (90 s + 40 s restore), p2 140-270.
    jobs = [JobSpec("p1", 0, 1, 100, estimate=100), JobSpec("p2", 0, 1, 100, estimate=200)]
    config = LucidConfig(profile_limit_s=10, profiler_nodes=1, profiler_max_share=0.5)
    cluster = Cluster(tuple(Node(f"n{i}", 1, "V100", 32.0) for i in range(2)))
    result = simulate(jobs, cluster, LucidPolicy(config), world=HeavyMemory())
    records = {r.id: r for r in result.records}
    assert_outcome(records, {"p1": (140, 0, 0), "p2": (270, 10, 0)})
    assert records["p2"].packed == 0


def test_ilucid_estimates_grow_with_attained_service_and_preemption_pays_the_restore() -> None:
    # 1 GPU; restore overhead 40 s. ilucid ranks by estimated remaining time; a running
    # job looks 40 s shorter (its restore cost), and an outlived estimate is replaced
    # by the median run time of finished jobs that ran longer (or twice its run time).
    #   t=0   a (true 300 s, estimated 100) starts.
    #   t=10  b (true 50, est 30): 30 < a's 90-40=50 -> a preempted (290+40 left).
    #   t=60  b done (run time 50 learned); a restarts with est. 90 left.
    #   t=100 c (true 20, est 20): a looks 50-40=10 s from done -> c waits (restore-aware).
    #   t=150 a outlived its estimate (ran 100): nothing longer finished -> 200 s;
    #         now 100-40=60 left > c's 20 -> a preempted again (240+40 left).
    #   t=150 c runs to 170; then a runs 170-450.
    jobs = [
        JobSpec("a", 0, 1, 300, estimate=100),
        JobSpec("b", 10, 1, 50, estimate=30),
        JobSpec("c", 100, 1, 20, estimate=20),
    ]
    records = run(jobs, Cluster.homogeneous(1, 1), estimate_srtf(aging=0.0))
    expected = {"a": (450, 0, 2), "b": (50, 10, 0), "c": (70, 150, 0)}
    for job_id, (jct, start, preemptions) in expected.items():
        record = records[job_id]
        # the re-estimate time is computed in floating point (150.00000000000003)
        assert record.end - record.submit == pytest.approx(jct)
        assert record.first_start == pytest.approx(start)
        assert record.preemptions == preemptions


def test_ilucid_aging_lets_a_long_waiting_job_overtake() -> None:
    # 1 GPU, no restore discount. x runs 0-100; L (est 500) waits from t=1, s (est 480)
    # from t=90. At t=100 plain estimate-SRTF picks s (480 < 500); with aging 0.5 the
    # keys are 500 - 0.5*99 = 450.5 for L and 480 - 0.5*10 = 475 for s: L goes first.
    jobs = [
        JobSpec("x", 0, 1, 100, estimate=100),
        JobSpec("L", 1, 1, 500, estimate=500),
        JobSpec("s", 90, 1, 480, estimate=480),
    ]
    cluster = Cluster.homogeneous(1, 1)
    plain = run(jobs, cluster, estimate_srtf(restore_aware=False))
    assert (plain["s"].first_start, plain["L"].first_start) == (100, 580)
    aged = run(jobs, cluster, estimate_srtf(aging=0.5, restore_aware=False))
    assert (aged["L"].first_start, aged["s"].first_start) == (100, 600)
    assert aged["L"].preemptions == aged["s"].preemptions == 0

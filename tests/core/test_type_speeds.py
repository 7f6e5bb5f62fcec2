"""GPU types by measured speed: the speed-ratio rule, against fastest-first and blind."""

from __future__ import annotations

import pytest

from ilucid.core import Cluster, JobSpec, Node, Scheduler, SchedulerConfig
from ilucid.core.policies import make_policy
from ilucid.core.type_speeds import TypeSpeeds


def _book(rule: str) -> TypeSpeeds:
    book = TypeSpeeds(rule)
    for i in range(99):  # the median job: 2x faster on v100 than on k80
        book.measured(f"m{i}", [("k80", 1.0), ("v100", 2.0)])
    book.measured("gains", [("k80", 1.0), ("v100", 3.0)])  # 3x: more than the median
    book.measured("little", [("k80", 1.0), ("v100", 1.2)])  # 1.2x: less
    return book


def test_speed_ratio_leaves_the_fast_type_to_the_job_that_gains_most() -> None:
    book = _book("speed-ratio")
    types = ("k80", "v100")
    assert book.ranking("gains", types) == ("v100", "k80")
    assert book.ranking("little", types) == ("k80", "v100")
    words = book.words("gains", "v100", types)
    assert words == "on v100: 3x its speed on k80 (measured), against 2x for the median job"


def test_fastest_first_and_blind() -> None:
    assert _book("fastest").ranking("little", ("k80", "v100")) == ("v100", "k80")
    assert _book("blind").ranking("gains", ("k80", "v100")) == ()
    with pytest.raises(ValueError, match="unknown GPU type rule"):
        TypeSpeeds("random")


def test_an_unmeasured_job_counts_as_the_median_job() -> None:
    book = _book("speed-ratio")
    book.measured("new", [("k80", 5.0)])  # measured on one type only
    assert book.log_speed("new", "v100") is not None
    assert book.ranking("new", ("k80", "v100")) in (("k80", "v100"), ("v100", "k80"))
    assert book.ranking("never-seen", ("k80", "v100")) == ("v100", "k80")  # median's order


def test_the_scheduler_places_by_the_rule_and_says_why() -> None:
    cluster = Cluster((Node("fast", 1, "v100"), Node("slow", 1, "k80")))
    jobs = [JobSpec(f"m{i}", 0, 1, 10, type_speeds=(("k80", 1.0), ("v100", 2.0))) for i in range(9)]
    little = JobSpec("little", 0, 1, 10, type_speeds=(("k80", 1.0), ("v100", 1.2)))
    placed = {}
    for rule in ("speed-ratio", "fastest"):
        config = SchedulerConfig(gpu_type_rule=rule, gpu_type_patience=0.0)
        scheduler = Scheduler(cluster, make_policy("fifo"), config=config)
        for job in jobs:
            scheduler.type_speeds.measured(job.id, job.type_speeds)
        scheduler.submit(little, 0)
        [decision] = scheduler.schedule(0)
        assert decision.placement is not None
        placed[rule] = cluster.nodes[decision.placement.parts[0][0]].gpu_type
        said = scheduler.placer.explain(little, decision.placement, scheduler.free)
        assert any(part.plugin == "gpu-type" and "1.2x" in part.detail for part in said)
    assert placed == {"speed-ratio": "k80", "fastest": "v100"}


def test_with_patience_a_job_that_gains_much_waits_for_its_fastest_type_and_says_so() -> None:
    cluster = Cluster((Node("fast", 1, "v100"), Node("slow", 1, "k80")))
    # (a job that may move to its fastest type later starts at once: moves off here)
    config = SchedulerConfig(
        gpu_type_rule="fastest", gpu_type_patience=0.03, gpu_type_move_after=0.0
    )
    scheduler = Scheduler(cluster, make_policy("fifo"), config=config)
    speeds = (("k80", 1.0), ("v100", 4.0))
    scheduler.submit(JobSpec("first", 0, 1, 1000, type_speeds=speeds, estimate=1000), 0)
    scheduler.submit(JobSpec("gains", 0, 1, 36_000, type_speeds=speeds, estimate=36_000), 0)
    [started] = scheduler.schedule(0)
    assert started.job_id == "first"
    # the k80 is free, but 3x the run time there is far more than its patience allows
    assert scheduler.wait_code("gains").value == "WaitingForFasterType"
    said = scheduler.why_pending("gains", 0)
    assert "1 k80 GPU(s) are free, but it waits up to 3,240 s more for v100" in said
    assert "where it runs 4x as fast" in said
    # past its patience it takes the slower type
    [late] = scheduler.schedule(3_241)
    assert late.job_id == "gains" and late.placement == scheduler.jobs["gains"].placement

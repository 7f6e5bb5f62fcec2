"""A live job whose process vanishes is requeued under every profile, inference too.

Found by the lifecycle fuzz (tests/service/test_lifecycle_fuzz.py): requeueing a
vanished inference service raised "inference services are never preempted" in
the pass, and ``fifo`` / ``lucid`` raised "never preempts", so the service's
loop failed on every pass from then on. A vanished job is not a preemption
decision: it goes back to the queue and starts again.
"""

from __future__ import annotations

import pytest

from ilucid.core import Action, Cluster, JobClass, JobSpec, JobStatus, Scheduler, make_policy


@pytest.mark.parametrize(
    "profile", ["fifo", "fifo-backfill", "sjf", "lucid", "srtf", "tiresias", "tiered", "ilucid"]
)
@pytest.mark.parametrize("job_class", [JobClass.TRAINING, JobClass.INFERENCE])
def test_a_vanished_job_waits_and_starts_again(profile: str, job_class: JobClass) -> None:
    scheduler = Scheduler(Cluster.homogeneous(1, 4), make_policy(profile))
    spec = JobSpec("a", 0.0, 2, 3600.0, job_class=job_class, estimate=3600.0)
    scheduler.submit(spec, 0.0)
    first = [d for d in scheduler.schedule(0.0) if d.action is Action.START]
    assert [d.job_id for d in first] == ["a"]
    scheduler.requeue("a", 10.0)  # re-planning profiles act on their next 60 s boundary
    assert scheduler.jobs["a"].status is JobStatus.PENDING
    assert scheduler.free.free_total == 4  # its GPUs are back
    again = [d.job_id for d in scheduler.schedule(60.0) if d.action is Action.START]
    assert again == ["a"], f"{profile}: the requeued job did not start again"

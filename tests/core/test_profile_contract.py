"""The contract every profile keeps, for every job class: no hook raises, the books balance.

Each registered profile (and a rule profile, and a plugin-list profile) is
driven through what a live service does to it: submit, start, preempt for
inference, requeue after the process vanished, a profiling run's report,
finish, and cancel while pending. At the end every GPU is free, the inference
lane holds nothing and nothing is pending. Before inference was routed once,
``RulePolicy.on_preempted`` had no inference branch: a vanished inference job
raised ``KeyError`` and the tier kept its GPUs for ever.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ilucid.core import (
    Cluster,
    Decision,
    JobClass,
    JobSpec,
    JobStatus,
    Policy,
    ProfileReport,
    Scheduler,
)
from ilucid.core.policies import PROFILES, build_profile, make_policy
from ilucid.core.policies.router import InferenceRouter
from ilucid.settings.profile_file import load_profile

RULE = '[profile]\nname = "contract-rule"\nbase = "rule"\n[queue_order]\nrule = "gpus"\n'
PLUGINS = (
    '[profile]\nname = "contract-plugins"\n'
    '[[plugin]]\nphase = "inference"\nname = "inference-first"\n'
    '[[plugin]]\nphase = "starvation_guard"\nname = "wait-bound"\nargs = { after_s = 50 }\n'
    '[[plugin]]\nphase = "admission"\nname = "tenant-quota"\n'
    '[[plugin]]\nphase = "queue_order"\nname = "fifo"\n'
    '[[plugin]]\nphase = "profiling"\nname = "first-run"\nargs = { limit_s = 30 }\n'
    '[[plugin]]\nphase = "plan"\nname = "in-order"\n'
)
NAMES = [n if n != "static-partition" else "static-partition:1" for n in PROFILES] + [
    "file:rule",
    "file:plugins",
]
CLASSES = [JobClass.TRAINING, JobClass.INFERENCE, JobClass.BEST_EFFORT]


def _policy(name: str, tmp_path: Path) -> Policy:
    if name.startswith("file:"):
        text = RULE if name == "file:rule" else PLUGINS
        path = tmp_path / "profile.toml"
        path.write_text(text, encoding="utf-8")
        return build_profile(load_profile(path))
    return make_policy(name)


class Driver:
    """A scheduler and what a driver owes it: profiling reports for bounded runs."""

    def __init__(self, policy: Policy) -> None:
        self.scheduler = Scheduler(Cluster.homogeneous(2, 4), policy)
        self.limits: dict[str, float] = {}

    def schedule(self, now: float) -> list[Decision]:
        decisions = self.scheduler.schedule(now)
        for decision in decisions:
            if decision.limit_s is not None:
                self.limits[decision.job_id] = now + decision.limit_s
        return decisions

    def report_profiles(self, now: float) -> None:
        for job_id, until in list(self.limits.items()):
            job = self.scheduler.jobs.get(job_id)
            if job is not None and job.status is JobStatus.RUNNING and until <= now:
                report = ProfileReport(sharing_score=1, gpu_memory_gb=4.0, estimate=200.0)
                self.scheduler.profiled(job_id, now, report)
            self.limits.pop(job_id)

    def ask_everything(self, now: float) -> None:
        """The questions the API asks of every job: none may raise."""
        for job in list(self.scheduler.jobs.values()):
            if job.status is JobStatus.PENDING:
                self.scheduler.why_pending(job.spec.id, now)
                self.scheduler.wait_code(job.spec.id)
        list(self.scheduler.expected_starts(now))

    def run(self, job_id: str) -> bool:
        return self.scheduler.jobs[job_id].status is JobStatus.RUNNING


def _spec(job_id: str, job_class: JobClass, gpus: int, at: float) -> JobSpec:
    return JobSpec(job_id, at, gpus, 500.0, estimate=500.0, job_class=job_class)


@pytest.mark.parametrize("job_class", CLASSES, ids=lambda c: c.value)
@pytest.mark.parametrize("name", NAMES)
def test_every_profile_keeps_the_contract(name: str, job_class: JobClass, tmp_path: Path) -> None:
    driver = Driver(_policy(name, tmp_path))
    scheduler = driver.scheduler
    # submit and start
    scheduler.submit(_spec("a", job_class, 2, 0.0), 0.0)
    driver.schedule(0.0)
    driver.ask_everything(0.0)
    assert driver.run("a"), f"{name}: a lone job on an idle cluster starts"
    # its process vanished: the live service requeues it; it starts again
    scheduler.requeue("a", 10.0)
    assert scheduler.jobs["a"].status is JobStatus.PENDING
    driver.ask_everything(10.0)
    driver.schedule(10.0)
    driver.report_profiles(400.0)
    driver.schedule(400.0)
    driver.ask_everything(400.0)
    # fill the cluster with training; an inference job then preempts where the
    # profile puts inference first (and waits where it does not)
    for index in range(3):
        scheduler.submit(_spec(f"t{index}", JobClass.TRAINING, 2, 401.0), 401.0)
    driver.schedule(401.0)
    scheduler.submit(_spec("i", JobClass.INFERENCE, 2, 402.0), 402.0)
    driver.schedule(402.0)
    driver.ask_everything(402.0)
    if isinstance(scheduler.policy, InferenceRouter) and "static" not in name:
        assert driver.run("i"), f"{name}: inference goes first"
    # a pending job is cancelled; the rest run to their end
    scheduler.submit(_spec("late", job_class, 8, 403.0), 403.0)
    driver.schedule(403.0)
    if scheduler.jobs["late"].status is JobStatus.PENDING:
        scheduler.withdraw("late", 404.0)
    now = 420.0  # on the 60 s boundaries a replanning profile waits for
    for _ in range(40):
        driver.report_profiles(now)
        for job in list(scheduler.jobs.values()):
            if job.status is JobStatus.RUNNING:
                scheduler.finish(job.spec.id, now)
        driver.schedule(now)
        driver.ask_everything(now)
        now += 420.0
        if all(j.status is JobStatus.DONE for j in scheduler.jobs.values()):
            break
    # the books: every GPU free, nothing pending, the inference lane empty
    left = {j.spec.id: j.status.value for j in scheduler.jobs.values()}
    assert all(status == "done" for status in left.values()), f"{name}: {left}"
    assert scheduler.free.free_total == scheduler.free.cluster.total_gpus
    assert list(scheduler.pending()) == []
    assert list(scheduler.policy.pending_order() or []) == []
    if isinstance(scheduler.policy, InferenceRouter):
        assert scheduler.policy.inference.used == pytest.approx(0.0)
        assert scheduler.policy.inference.pending == []


def test_a_vanished_inference_job_under_a_rule_profile_is_served_again(tmp_path: Path) -> None:
    """The finding: the rule profile's missing inference branch (KeyError: 0)."""
    driver = Driver(_policy("file:rule", tmp_path))
    scheduler = driver.scheduler
    scheduler.submit(_spec("serve", JobClass.INFERENCE, 1, 0.0), 0.0)
    driver.schedule(0.0)
    scheduler.requeue("serve", 5.0)
    driver.schedule(5.0)
    assert driver.run("serve")
    assert isinstance(scheduler.policy, InferenceRouter)
    assert scheduler.policy.inference.used == pytest.approx(1.0)

"""A decision's sentence may be written when first read (issue 15's speed goal: a
replay reads few of its 200,000 sentences), but it says what held when the decision
was made, and a reason behaves as the plain value it was."""

from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError

import pytest

from ilucid.core import Cluster, JobSpec, Scheduler
from ilucid.core.decision import Reason
from ilucid.core.policies.default import DefaultConfig, DefaultPolicy
from ilucid.core.reason_codes import ReasonCode


def test_a_deferred_sentence_is_written_once_and_equals_the_plain_reason() -> None:
    calls: list[int] = []

    def words() -> str:
        calls.append(1)
        return "because 3 GPUs are free"

    deferred = Reason(ReasonCode.SCHEDULED, words, {"free": 3.0})
    assert calls == []
    plain = Reason(ReasonCode.SCHEDULED, "because 3 GPUs are free", {"free": 3.0})
    assert deferred == plain and hash(deferred) == hash(plain)
    assert deferred.message == str(deferred) == "because 3 GPUs are free"
    assert calls == [1], "written once, then kept"
    assert Reason(ReasonCode.SCHEDULED, "other") != plain
    assert Reason(ReasonCode.PACKED, "because 3 GPUs are free", {"free": 3.0}) != plain
    copy = pickle.loads(pickle.dumps(Reason(ReasonCode.QUOTA_EXCEEDED, words)))
    assert copy == Reason(ReasonCode.QUOTA_EXCEEDED, words())
    assert copy.code is ReasonCode.QUOTA_EXCEEDED, "the code comes back as the enum member"
    assert repr(plain) == (
        "Reason(code='Scheduled', message='because 3 GPUs are free', numbers={'free': 3.0})"
    )
    with pytest.raises(FrozenInstanceError):
        plain.code = ReasonCode.PACKED  # type: ignore[misc]


def test_a_start_reason_read_later_gives_the_numbers_of_its_decision() -> None:
    config = DefaultConfig(replan_interval_s=0.0, profile_limit_s=None)
    scheduler = Scheduler(Cluster.homogeneous(1, 1), DefaultPolicy(config))
    scheduler.submit(JobSpec("a", 0.0, 1, 4000.0, estimate=4000.0), 0.0)
    [start] = scheduler.schedule(0.0)
    # the job runs on, is demoted past 1,800 GPU-s and finishes before anyone reads why
    scheduler.schedule(1900.0)
    scheduler.finish("a", 4000.0)
    assert start.reasons[0].message == (
        "ilucid: level 0 of 3 (attained 0 GPU-s < 1,800), estimated 4,000 s x 1 GPU(s) left;"
        " within the GPUs in its order"
    )

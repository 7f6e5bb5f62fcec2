"""Jobs that report their progress in a replay (``ilucid simulate --progress-share F``)."""

from __future__ import annotations

import math

import pytest

from ilucid.core import Cluster, JobSpec, make_policy
from ilucid.sim.engine import simulate
from ilucid.sim.progress_reports import FIRST_REPORT_S, ProgressReports


def test_the_share_picks_the_same_jobs_every_time() -> None:
    reports = ProgressReports(0.5)
    ids = [f"job-{i}" for i in range(2_000)]
    chosen = [i for i in ids if reports.steps_for(i, 100.0) is not None]
    assert 0.45 < len(chosen) / len(ids) < 0.55
    assert chosen == [i for i in ids if ProgressReports(0.5).steps_for(i, 100.0) is not None]
    assert all(ProgressReports(0.0).steps_for(i, 100.0) is None for i in ids)
    assert all(ProgressReports(1.0).steps_for(i, 100.0) is not None for i in ids)
    assert ProgressReports(1.0).steps_for("a", 0.0) is None  # nothing to step through


def test_steps_run_out_with_the_work_and_lost_work_takes_them_back() -> None:
    steps = ProgressReports(1.0).steps_for("a", 1_000.0)
    assert steps is not None
    assert steps.total == math.ceil(steps.rate * 1_000.0)
    assert steps.report(500.0, 0.0) == pytest.approx(500.0 * steps.rate)
    assert steps.report(1_000.0, 0.0) == steps.total - 1.0  # never done before it ends
    assert steps.report(200.0, 0.0) == pytest.approx(200.0 * steps.rate)  # a checkpoint


def test_reports_come_after_a_minute_then_doubling_then_evenly() -> None:
    reports = ProgressReports(1.0, every_s=600.0)
    at, seen = 0.0, []
    for _ in range(7):
        at = reports.next_report(at)
        seen.append(at)
    assert seen == [FIRST_REPORT_S, 120.0, 240.0, 480.0, 960.0, 1_560.0, 2_160.0]


@pytest.mark.parametrize(("share", "every", "noise"), [(1.5, 600.0, 0.1), (0.5, 10.0, 0.1)])
def test_settings_no_replay_can_use_are_refused(share: float, every: float, noise: float) -> None:
    with pytest.raises(ValueError):
        ProgressReports(share, every, noise)


def _jobs() -> list[JobSpec]:
    """The model has it backwards: ``a`` looks short and is long, ``b`` the reverse."""
    return [
        JobSpec("a", 0.0, 1, 20_000.0, estimate=1_000.0),
        JobSpec("b", 0.0, 1, 4_000.0, estimate=50_000.0),
        JobSpec("c", 100.0, 1, 6_000.0, estimate=40_000.0),
    ]


def _replay(reports: ProgressReports | None) -> dict[str, float]:
    result = simulate(
        _jobs(), Cluster.homogeneous(1, 1), make_policy("ilucid"), progress_reports=reports
    )
    return {r.id: r.end for r in result.records}


def test_share_zero_replays_as_without_reports() -> None:
    assert _replay(ProgressReports(0.0)) == _replay(None)


def test_reported_progress_reorders_a_replay_by_what_jobs_have_left() -> None:
    """Without reports the model's guess runs ``a`` (20,000 s) ahead of the rest for
    long stretches; with them ``b`` and ``c`` end first and the mean end is earlier."""
    blind = _replay(None)
    told = _replay(ProgressReports(1.0, noise=0.0))
    assert told["b"] < told["a"] and told["c"] < told["a"]
    assert sum(told.values()) < sum(blind.values())

"""Issue 30, finding 4: a tiny stated estimate cannot push everyone else off the GPUs.

Bob runs 4 x ``sleep 600`` (1 GPU, ``estimate_s`` 600) on a 4-GPU node; Alice submits
``sleep 90`` on all 4 GPUs with ``estimate_s`` 1. Driven through the API and the real
service, core and default profile (``ilucid``, built as ``ilucid serve`` builds it
without a metrics source), over an in-memory backend with a fake clock: each pass is
one ``reconcile()`` at a chosen time.

What the design does: neither user has a record, so each statement counts 50%
against the model's estimate, which with no history is the 3,600 s assumed for a
job without one. Alice's job ranks by sqrt(1 x 3600) = 60 s, Bob's by
sqrt(600 x 3600) = 1,470 s: her job goes first and preempts Bob's four once. Her
statement claimed the job ends within 1 s of its start; at the first pass after that
(start + 1 s, counted from the start decision, as the core counts run time) the claim
counts no more and her job ranks by the 3,600 s left: that pass preempts it and
decides Bob's four starts, which launch as soon as its process has exited. Her job then
waits behind Bob's (3,600 s left against their 1,470 s).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ilucid.service.job_store import StoryLine
from ilucid.service.running_sentence import ran_s

sys.path.insert(0, str(Path(__file__).resolve().parent))
from estimate_site import T0, Site


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path)


def _alice_launched(site: Site) -> tuple[list[str], str]:
    """Bob's four run from T0; Alice's job preempts them at T0 + 6 and is launched at
    T0 + 6.5, once their processes exited."""
    body = {"command": ["sleep", "600"], "gpus": 1, "estimate_s": 600}
    bob = [site.submit("bob", body) for _ in range(4)]
    site.at(T0)
    assert site.running() == set(bob)
    alice = site.submit("alice", {"command": ["sleep", "90"], "gpus": 4, "estimate_s": 1})
    site.at(T0 + 6)  # her job is decided (ranked by 60 s) and Bob's four are stopped
    assert site.stopping() == set(bob)
    site.exit_stopped()
    site.at(T0 + 6.5)
    assert site.running() == {alice}
    assert all(site.row(job).state == "pending" for job in bob)
    return bob, alice


def test_a_one_second_estimate_preempts_once_and_gives_the_gpus_back_once_overrun(
    site: Site,
) -> None:
    bob, alice = _alice_launched(site)
    # the clock passes her start (T0 + 6) + her 1 s: the first pass after gives the
    # GPUs back: her job is stopped and Bob's four are decided, launched once it exited
    site.at(T0 + 7.5)
    assert site.stopping() == {alice}
    assert all(site.row(job).state == "running" for job in bob)  # decided
    site.exit_stopped()
    site.at(T0 + 8)
    assert site.running() == set(bob)
    assert site.row(alice).state == "pending"

    # and it stays so: her job waits behind Bob's, which are never preempted again
    for moment in (T0 + 10, T0 + 60, T0 + 300, T0 + 590):
        site.at(moment)
        assert site.running() == set(bob), moment
    assert [site.preempted(job) for job in bob] == [1, 1, 1, 1]
    assert site.preempted(alice) == 1


def test_explain_says_how_much_the_statement_counted_and_that_it_overran(site: Site) -> None:
    bob, alice = _alice_launched(site)
    says = site.service.explain(alice)
    assert (
        "estimate 60 s: the user's 1 s counted 50% (no ended job with a stated estimate yet)"
        " against no model estimate (3,600 s assumed)"
    ) in says, says
    assert "overran" not in says
    site.at(T0 + 7.5)
    explained = site.client.get(f"/jobs/{alice}/explain", headers=site.headers["alice"]).json()
    stopped = [d["message"] for d in explained["decisions"] if d["action"] == "preempt"]
    assert len(stopped) == 1, explained["decisions"]
    assert "estimated 3,598 s x 4 GPU(s) left" in stopped[0], stopped
    assert "it overran its estimate of 1 s, which counts no more" in stopped[0], stopped
    site.exit_stopped()
    site.at(T0 + 8)
    bobs = site.service.explain(bob[0])
    assert "estimate 1,470 s: the user's 600 s counted 50%" in bobs, bobs


@pytest.mark.parametrize("seconds", [1e-320, 0, 0.5, 0.999])
def test_an_estimate_under_one_second_is_refused_at_the_edge(site: Site, seconds: float) -> None:
    body = {"command": ["sleep", "1"], "estimate_s": seconds}
    answer = site.client.post("/jobs", json=body, headers=site.headers["alice"])
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"].startswith("estimate_s: must be >= 1"), answer.json()
    assert site.submit("alice", {**body, "estimate_s": 1})


def test_a_running_job_past_its_statement_says_so(site: Site) -> None:
    # alone on the node, nothing preempts it: explain says the claim counts no more
    alice = site.submit("alice", {"command": ["sleep", "90"], "gpus": 4, "estimate_s": 1})
    site.at(T0)
    site.at(T0 + 0.5)
    assert "overran" not in site.service.explain(alice)
    site.at(T0 + 5)
    assert site.running() == {alice}
    says = site.service.explain(alice)
    assert says.endswith(
        "; estimate 60 s: the user's 1 s counted 50% (no ended job with a stated estimate"
        " yet) against no model estimate (3,600 s assumed); it overran its estimate of 1 s,"
        " which counts no more: ranked by 3,600 s since"
    ), says


def test_run_time_is_summed_over_the_runs_of_a_story() -> None:
    story = [
        StoryLine(0.0, "", "pending", "request: submit", "submitted"),
        StoryLine(5.0, "pending", "running", "decision: start", "fits"),
        StoryLine(6.0, "decided", "running", "backend: launched", "launched on GPUs 0"),
        StoryLine(15.0, "running", "pending", "decision: preempt", "preempted"),
        StoryLine(30.0, "pending", "running", "decision: start", "fits"),
    ]
    assert ran_s(story, 40.0) == 20.0  # 5-15 and 30-40
    assert ran_s(story[:4], 40.0) == 10.0

"""How much a user's stated run times count: their record, walk-forward, across restarts.

Weight = (accurate + 1) / (scored + 2) over the user's last 20 succeeded jobs with a
statement, a job being accurate when it ran within 2x of it (``estimate_trust``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ilucid.core.stated_estimate import blend
from ilucid.service.estimate_trust import (
    PRIOR,
    WINDOW,
    Trust,
    TrustBook,
    accurate,
    weight_of,
    why_of,
)
from ilucid.service.job_store import spec_of

sys.path.insert(0, str(Path(__file__).resolve().parent))
from estimate_site import T0, Site


def test_accurate_means_within_twice_either_way() -> None:
    assert accurate(10, 5) and accurate(10, 20) and accurate(10, 10)
    assert not accurate(10, 4.99) and not accurate(10, 20.01)
    assert accurate(0.001, 2.0)  # a statement under 1 s counts as 1 s


def test_the_weight_follows_the_record_with_a_prior_of_one_half() -> None:
    book = TrustBook()
    assert book.trust("new") == Trust(0, 0) and Trust().weight == PRIOR
    assert book.note("new") == ""  # no clause: the prior
    for ran in (9.0, 11.0, 10.0):
        book.observe("good", 10, ran)
    for _ in range(3):
        book.observe("bad", 1, 100)
    assert book.trust("good").weight == 0.8  # (3 + 1) / (3 + 2)
    assert book.trust("bad").weight == 0.2  # (0 + 1) / (3 + 2)
    book.observe("mixed", 10, 10)
    book.observe("mixed", 10, 100)
    assert book.trust("mixed") == Trust(1, 2) and book.trust("mixed").weight == 0.5
    # 4 of 10 within 2x: 5/12, shown and used as 42%
    for hit in (True,) * 4 + (False,) * 6:
        book.observe("ten", 10, 10 if hit else 50)
    assert book.trust("ten").weight == 0.42
    assert book.note("ten") == (
        "; stated estimates by this user count 42%: 4 of the last 10 ended jobs with a"
        " stated estimate ran within 2x of it"
    )


def test_the_window_keeps_the_last_jobs_so_a_user_can_mend_their_ways() -> None:
    book = TrustBook()
    for _ in range(WINDOW):
        book.observe("u", 1, 100)
    assert book.trust("u") == Trust(0, WINDOW) and book.trust("u").weight == 0.05
    for count in range(1, WINDOW + 1):
        book.observe("u", 10, 10)
        assert book.trust("u") == Trust(count, WINDOW)
    assert book.trust("u").weight == 0.95
    book.observe("u", 1, 100)  # an accurate one leaves as this one joins
    assert book.trust("u") == Trust(WINDOW - 1, WINDOW)


def test_the_weight_is_read_back_from_the_note_it_was_written_into() -> None:
    model = "estimate 2,310 s by duration model v3 = exp(+7.10 +0.32 [user=x]) - 1"
    clause = Trust(3, 10).note()
    assert weight_of(model + clause) == 0.33
    assert why_of(model + clause) == (
        "3 of the last 10 ended jobs with a stated estimate ran within 2x of it"
    )
    # no clause: the prior, and its why
    assert weight_of(model) == PRIOR and weight_of(None) == PRIOR and weight_of("") == PRIOR
    assert why_of(None) == "no ended job with a stated estimate yet"
    # the last clause is the keeper's own, whatever the model's note held before it
    forged = "estimate 9 s: median of x; stated estimates by this user count 100%: ha's"
    assert weight_of(forged + clause) == 0.33
    assert weight_of("x; stated estimates by this user count lots") == PRIOR


def _run(site: Site, user: str, stated: float, ran: float, at: float) -> float:
    """One job of ``user`` stating ``stated`` s that runs ``ran`` s from ``at``; the time
    it ended."""
    job = site.submit(user, {"command": ["work"], "gpus": 1, "estimate_s": stated})
    site.at(at)
    assert job in site.running()
    site.backend.end(job, 0)
    site.at(at + ran)
    assert site.row(job).state == "succeeded"
    return at + ran


def test_a_record_is_kept_walk_forward_and_survives_a_restart(tmp_path: Path) -> None:
    site = Site(tmp_path)
    # submitted before any of bob's jobs ended (and cancelled: it never runs nor counts)
    early = site.submit("bob", {"command": ["wait"], "gpus": 1, "estimate_s": 1})
    assert site.client.delete(f"/jobs/{early}", headers=site.headers["bob"]).status_code == 200
    moment = T0
    for _ in range(3):  # bob states 1 s, runs 100 s; alice states 10 s, runs 10 s
        moment = _run(site, "bob", 1, 100, moment + 1)
        moment = _run(site, "alice", 10, 10, moment + 1)
    assert spec_of(site.row(early)).stated_weight == PRIOR  # as it was at its submission
    late = site.submit("bob", {"command": ["wait"], "gpus": 1, "estimate_s": 1})
    fair = site.submit("alice", {"command": ["wait"], "gpus": 1, "estimate_s": 10})
    spec = site.service.scheduler.jobs[late].spec
    assert spec.stated_weight == 0.2  # 0 of 3 within 2x
    assert spec.model_duration == pytest.approx(100.0)  # the median of bob's jobs
    assert spec.expected_duration == pytest.approx(blend(1, 100, 0.2))  # 39.8 s
    assert site.service.scheduler.jobs[fair].spec.stated_weight == 0.8  # 3 of 3
    note = site.row(late).estimate_note or ""
    assert note.endswith(
        "; stated estimates by this user count 20%: 0 of the last 3 ended jobs with a"
        " stated estimate ran within 2x of it"
    ), note

    service = site.restart()  # the core rebuilt from the database, the book too
    assert service.scheduler.jobs[late].spec.stated_weight == 0.2
    assert service.scheduler.jobs[fair].spec.stated_weight == 0.8
    again = site.submit("bob", {"command": ["wait"], "gpus": 1, "estimate_s": 5})
    assert service.scheduler.jobs[again].spec.stated_weight == 0.2
    shown = site.client.get(f"/jobs/{again}/explain", headers=site.headers["bob"]).json()
    assert "stated estimates by this user count 20%" in shown["estimate"]["text"]


def _cancelled_after(site: Site, user: str, stated: float, ran: float, at: float) -> float:
    """One job of ``user`` stating ``stated`` s, cancelled by its owner after ``ran`` s."""
    job = site.submit(user, {"command": ["work"], "gpus": 1, "estimate_s": stated})
    site.at(at)
    assert job in site.running()
    site.now = at + ran
    answer = site.client.delete(f"/jobs/{job}", headers=site.headers[user])
    assert answer.json()["state"] == "stopping"
    site.exit_stopped()
    site.at(at + ran + 1)
    assert site.row(job).state == "cancelled"
    return at + ran + 1


def test_cancelling_an_overrun_does_not_hide_it(tmp_path: Path) -> None:
    site = Site(tmp_path)
    moment = _cancelled_after(site, "bob", 1, 100, T0 + 1)  # ran 100x its statement
    moment = _cancelled_after(site, "alice", 60, 10, moment + 1)  # cancelled early: unscored
    late = site.submit("bob", {"command": ["wait"], "gpus": 1, "estimate_s": 1})
    fair = site.submit("alice", {"command": ["wait"], "gpus": 1, "estimate_s": 60})
    assert site.service.scheduler.jobs[late].spec.stated_weight == 0.33  # 0 of 1 within 2x
    assert site.service.scheduler.jobs[fair].spec.stated_weight == PRIOR  # no record
    service = site.restart()  # the record is rebuilt from the database alike
    again = site.submit("bob", {"command": ["wait"], "gpus": 1, "estimate_s": 1})
    assert service.scheduler.jobs[again].spec.stated_weight == 0.33

"""Expected starts as ranges in the live service (issue 37): the queue and explain give
the median, the 80% range and what it assumes; each start is kept as an outcome in
the pass that records it, and a restart learns them again."""

from __future__ import annotations

import re
from pathlib import Path

from estimate_site import T0, Site
from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.service.db import StartOutcomeRow


def test_the_queue_gives_a_range_a_start_grades_it_and_a_restart_remembers(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    site.at(T0)
    first = site.submit("bob", {"command": ["sleep", "1"], "gpus": 4, "estimate_s": 600})
    site.at(T0 + 1)
    assert site.running() == {first}
    waiting = site.submit("alice", {"command": ["true"], "gpus": 4, "estimate_s": 600})
    site.at(T0 + 2)

    [entry] = site.client.get("/api/v1/queue", headers=site.headers["alice"]).json()
    assert entry["id"] == waiting and entry["position"] == 1
    low, median, high = (
        entry[k] for k in ("expected_start_p10", "expected_start", "expected_start_p90")
    )
    assert T0 + 2 <= low <= median <= high and median > T0 + 2
    explained = site.client.get(f"/api/v1/jobs/{waiting}/explain", headers=site.headers["alice"])
    outlook = explained.json()["expected_start"]
    assert (outlook["expected_start_p10"], outlook["expected_start_p90"]) == (low, high)
    said = outlook["assumes"]
    assert re.match(r"in \d+ min \(likely (within )?[\d.]+", said), said
    assert f", if the running job it waits for ends when estimated ({first} in " in said
    assert said.endswith("(range from no past predictions yet: a 3x margin either way)")

    # the running job ends late, at twice its estimate: the waiting one starts then
    site.now = T0 + 1200
    site.backend.end(first, 0)
    site.at(T0 + 1200)
    assert site.running() == {waiting}
    assert (
        site.client.get(f"/api/v1/jobs/{waiting}/explain", headers=site.headers["alice"]).json()[
            "expected_start"
        ]
        is None
    )  # it runs: no expected start any more
    with Session(site.engine) as session:
        [row] = session.scalars(select(StartOutcomeRow)).all()
    assert (row.job_id, row.made_at, row.started) == (waiting, T0 + 2, T0 + 1200)
    assert (row.low, row.high) == (low, high)
    learned = site.service.reconciler.start_ranges
    assert learned.outcomes == 1 and learned.fresh == []
    levels = (learned.low_level, learned.high_level)

    # a restart (a crash) replays the stored outcome: the same levels, the same count
    restarted = site.restart().reconciler.start_ranges
    assert restarted is not learned
    assert restarted.outcomes == 1 and (restarted.low_level, restarted.high_level) == levels

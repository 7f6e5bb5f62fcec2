"""What each submission used to look up afresh, now remembered, and for how long:
a token's owner, a duration estimate, whether a job's account can enter its cwd."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from ilucid.backends.accounts import job_account
from ilucid.backends.enter_check import REMEMBER_S as ENTER_REMEMBER_S
from ilucid.backends.enter_check import can_enter
from ilucid.core import JobSpec
from ilucid.estimators.live import DurationEstimate
from ilucid.service.auth import authenticate, create_token, revoke_tokens
from ilucid.service.db import make_engine, migrate
from ilucid.service.duration_keeper import DurationKeeper
from ilucid.service.estimate_memo import EstimateMemo


@pytest.fixture
def database(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    yield url


def test_a_token_revoked_here_is_refused_at_once(database: str) -> None:
    engine = make_engine(database)
    token = create_token(engine, "alice", "vision")
    assert authenticate(engine, token) is not None  # remembered from now on
    revoke_tokens(engine, "alice")
    assert authenticate(engine, token) is None


def test_a_token_revoked_elsewhere_is_refused_at_once(database: str) -> None:
    service: Engine = make_engine(database)
    other = make_engine(database)  # another process: `ilucid token revoke`, a replica
    token = create_token(service, "alice", "vision")
    who = authenticate(service, token)
    assert who is not None and who.user == "alice"
    assert authenticate(service, token) == who  # remembered
    revoke_tokens(other, "alice")
    assert authenticate(service, token) is None  # at once, well within REMEMBER_S


def test_a_new_token_works_at_once_after_an_unknown_one_was_asked(database: str) -> None:
    engine = make_engine(database)
    assert authenticate(engine, "not-a-token") is None  # an unknown one is not remembered
    token = create_token(engine, "bob", "nlp")
    assert authenticate(engine, token) is not None


class CountingKeeper(DurationKeeper):
    """The real keeper, counting the estimates it makes."""

    made = 0

    def estimate(self, job: JobSpec) -> DurationEstimate:
        self.made += 1
        return super().estimate(job)


def _job(user: str, gpus: int = 1, when: float = 1_000_000.0) -> JobSpec:
    return JobSpec("", when, gpus, 0.0, tenant="t", user=user)


def test_an_estimate_is_made_once_per_feature_row_and_again_after_a_job_ends() -> None:
    keeper = CountingKeeper(min_jobs=1)
    memo = EstimateMemo(keeper)
    keeper.finished(_job("ann"), 100.0)
    first = memo.estimate(_job("ann"))
    assert first.seconds == 100.0 and first == keeper.live.estimate(_job("ann"))
    for _ in range(20):  # a burst of the same request: one estimate
        assert memo.estimate(_job("ann")) == first
    assert keeper.made == 1
    assert memo.estimate(_job("ann", gpus=4)).seconds == 100.0  # another row: another estimate
    assert keeper.made == 2
    keeper.finished(_job("ann"), 300.0)  # history changed: the same request is estimated anew
    again = memo.estimate(_job("ann"))
    assert keeper.made == 3 and again.seconds == 200.0
    assert again == keeper.live.estimate(_job("ann"))


@pytest.mark.skipif(os.geteuid() != 0, reason="asking as another account needs root")
def test_a_yes_to_entering_a_directory_is_remembered_a_no_is_not() -> None:
    account = job_account("#61999")  # a dynamic uid: no account of this host
    with tempfile.TemporaryDirectory() as folder:
        opened, closed = Path(folder) / "opened", Path(folder) / "closed"
        opened.mkdir(mode=0o755)
        closed.mkdir(mode=0o700)
        Path(folder).chmod(0o755)
        assert can_enter(account, str(opened))
        assert not can_enter(account, str(closed))
        closed.chmod(0o755)  # fixed by its owner: accepted at once (a no is not remembered)
        assert can_enter(account, str(closed))
        opened.chmod(0o700)  # closed since the yes: remembered for ENTER_REMEMBER_S
        began = time.monotonic()
        assert can_enter(account, str(opened))
        assert time.monotonic() - began < ENTER_REMEMBER_S

"""Whom a job runs as when the service is root: its token's Unix account, else a uid
of its user's own from the service's dynamic range, never shared.

Users without a Unix account used to share one account (``nobody``), so one
user's job could signal another's. Now each such user gets a uid of a configured
range (``ilucid serve --dynamic-uids``, systemd's DynamicUser range by default),
recorded in the ``dynamic_uids`` table for the user (every token of the user
runs as it) and never given to anyone else; a uid that a real account of this
host holds is skipped. Without a range, a root service refuses such a user's
submissions with a sentence that says how to map them.
"""

from __future__ import annotations

import pwd

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ilucid.backends.accounts import dynamic_run_as
from ilucid.service.db import DynamicUidRow
from ilucid.service.job_model import NotPermitted, TryAgain

__all__ = ["DEFAULT_DYNAMIC_UIDS", "parse_uid_range", "run_as_for"]

#: systemd's range for DynamicUser= (61184-65519), which Debian's useradd never hands out
DEFAULT_DYNAMIC_UIDS = (61184, 65519)


def parse_uid_range(text: str) -> tuple[int, int] | None:
    """``FIRST-LAST`` (e.g. ``61184-65519``), or ``none``: the range of dynamic uids."""
    if text.strip().lower() == "none":
        return None
    first, dash, last = text.partition("-")
    if not dash or not first.strip().isdigit() or not last.strip().isdigit():
        raise ValueError(f"--dynamic-uids {text!r}: give FIRST-LAST, e.g. 61184-65519, or none")
    low, high = int(first), int(last)
    if not 1000 <= low <= high < 2**31 - 1:
        raise ValueError(f"--dynamic-uids {text!r}: the uids must be >= 1000 and FIRST <= LAST")
    return low, high


def _taken_by_host(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def run_as_for(
    engine: Engine, user: str, unix_user: str | None, uids: tuple[int, int] | None
) -> str:
    """The ``run_as`` of a job of ``user`` whose token maps to ``unix_user`` (or none)."""
    if unix_user is not None:
        return unix_user
    if uids is None:
        raise NotPermitted(
            f"run_as: user {user!r} has no Unix account, and this service (root) runs no"
            " job without one: map the user (ilucid token create --user"
            f" {user} --tenant T --unix-user ACCOUNT) or start the service with"
            " --dynamic-uids FIRST-LAST"
        )
    for _ in range(20):  # another submission may take the same free uid at once
        with Session(engine) as session:
            mine = session.scalars(select(DynamicUidRow.uid).where(DynamicUidRow.user == user))
            uid = mine.first()
            if uid is not None:
                return dynamic_run_as(uid)
            taken = set(session.scalars(select(DynamicUidRow.uid)))
            free = next(
                (
                    u
                    for u in range(uids[0], uids[1] + 1)
                    if u not in taken and not _taken_by_host(u)
                ),
                None,
            )
            if free is None:
                raise TryAgain(
                    f"run_as: every uid of --dynamic-uids {uids[0]}-{uids[1]} is taken; map"
                    f" user {user!r} to a Unix account or widen the range"
                )
            session.add(DynamicUidRow(uid=free, user=user))
            try:
                session.commit()
            except IntegrityError:
                continue
            return dynamic_run_as(free)
    raise TryAgain("run_as: could not give the user a uid (too many at once); try again")

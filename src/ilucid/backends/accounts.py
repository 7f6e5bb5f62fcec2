"""The Unix identities jobs run as: a real account named plainly, or a dynamic uid of
the service's range (``#61184``); never root."""

from __future__ import annotations

import os
import pwd
import re
from dataclasses import dataclass

__all__ = ["DYNAMIC_PREFIX", "Account", "dynamic_run_as", "job_account", "unix_account"]

_UNIX_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}\$?$")
#: ``run_as`` of a job whose token has no Unix account: ``#<uid>``, a uid of its own
DYNAMIC_PREFIX = "#"


@dataclass(frozen=True, slots=True)
class Account:
    """Whom a job runs as: numeric ids (what the runner switches to) and the names and
    home its environment shows."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str
    shell: str


def unix_account(name: str) -> pwd.struct_passwd:
    """The account ``name`` on this host; root is refused (a job never runs as root)."""
    if not _UNIX_NAME.match(name):
        raise ValueError(f"unix user {name!r}: not a valid account name")
    try:
        account = pwd.getpwnam(name)
    except KeyError:
        raise ValueError(f"unix user {name!r}: no such account on this host") from None
    if account.pw_uid == 0:
        raise ValueError(f"unix user {name!r} is root: jobs never run as root")
    return account


def dynamic_run_as(uid: int) -> str:
    """The ``run_as`` of a dynamic uid."""
    return f"{DYNAMIC_PREFIX}{uid}"


def job_account(run_as: str) -> Account:
    """The identity ``run_as`` names: an account name, or ``#<uid>`` for a dynamic uid
    (its own group, no supplementary groups, no home, as systemd's DynamicUser)."""
    if run_as.startswith(DYNAMIC_PREFIX):
        text = run_as[len(DYNAMIC_PREFIX) :]
        if not text.isdigit() or not 0 < int(text) < 2**31:
            raise ValueError(f"run_as {run_as!r}: not a dynamic uid (#1 .. #2147483647)")
        uid = int(text)
        return Account(f"ilucid-{uid}", uid, uid, (), "/nonexistent", "/bin/sh")
    account = unix_account(run_as)
    groups = tuple(os.getgrouplist(account.pw_name, account.pw_gid))
    return Account(
        account.pw_name,
        account.pw_uid,
        account.pw_gid,
        groups,
        account.pw_dir,
        account.pw_shell or "/bin/sh",
    )

"""The Unix accounts jobs may run as: real, named plainly, and never root."""

from __future__ import annotations

import pwd
import re

__all__ = ["unix_account"]

_UNIX_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}\$?$")


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

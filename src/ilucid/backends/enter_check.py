"""Whether a job's account can enter its working directory, asked as that account.

The kernel's answer is the only exact one (every directory on the way, the
account's groups, ACLs), so a process runs ``test -x`` as the account. Forking
the service costs milliseconds, and a burst of submissions asks the same question
for the same account and directory, so a yes is remembered for
:data:`REMEMBER_S`; a no never is (a user who fixes the permissions may submit
again at once). A directory closed within that time fails at launch instead,
where the job's story says why.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time

from ilucid.backends.accounts import Account

__all__ = ["REMEMBER_S", "can_enter"]

#: how long a yes is remembered, seconds
REMEMBER_S = 10.0

_entered: dict[tuple[Account, str], float] = {}  # (account, directory) -> when it could
_lock = threading.Lock()


def can_enter(account: Account, cwd: str) -> bool:
    """Whether ``account`` can enter ``cwd`` (a yes of the last :data:`REMEMBER_S`)."""
    key = (account, cwd)
    now = time.monotonic()
    with _lock:
        seen = _entered.get(key)
    if seen is not None and now - seen < REMEMBER_S:
        return True
    test = shutil.which("test", path="/usr/bin:/bin") or "/usr/bin/test"
    entered = subprocess.run(
        [test, "-x", cwd],
        cwd="/",
        user=account.uid,
        group=account.gid,
        extra_groups=list(account.groups),
        env={},
        timeout=10,
        check=False,
    )
    if entered.returncode != 0:
        return False
    with _lock:
        if len(_entered) > 4096:  # stale entries of many directories: start afresh
            _entered.clear()
        _entered[key] = now
    return True

"""The commands run on the service's own host besides ``serve``: ``token`` (create or
revoke API tokens in the service's database) and ``slurm-release-held`` (fail-open),
and the private data directory they share with ``serve``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ilucid.cli.common import DEFAULT_DATA, CliError

__all__ = [
    "add_release_held_arguments",
    "add_token_arguments",
    "db_url",
    "migrate_or_refuse",
    "private_data_dir",
    "release_held",
    "token",
]


def add_release_held_arguments(fail_open: argparse.ArgumentParser) -> None:
    fail_open.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA, help="the service's data directory"
    )
    fail_open.add_argument("--slurm-conf", help="path of slurm.conf (default: Slurm's)")
    fail_open.add_argument(
        "--if-idle-for",
        type=float,
        default=0.0,
        help="only when the service has not completed a pass for this many seconds"
        " (for a timer: a live service is left alone)",
    )


def add_token_arguments(token: argparse.ArgumentParser) -> None:
    token.add_argument(
        "action",
        choices=["create", "revoke"],
        help="create: a new token; revoke: delete every token of --user (at once)",
    )
    token.add_argument("--user", required=True, help="the ilucid user the token speaks for")
    token.add_argument(
        "--tenant",
        help="the user's team (create: required; revoke: only its tokens, default: all)",
    )
    token.add_argument("--admin", action="store_true", help="may see and act on every job")
    token.add_argument(
        "--unix-user",
        help="create: the Unix account this token's jobs run as when the service is root"
        " (default: a uid of the user's own from serve's --dynamic-uids range)",
    )
    token.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA, help="the service's data directory"
    )
    token.add_argument("--db", help="database URL (default: SQLite in --data-dir)")


def private_data_dir(folder: Path) -> None:
    """The data directory is the service's alone (0700): jobs and other users can read
    neither the database, the admin token nor anyone's job logs. Files created in it
    from now on are 0600 (umask 077). Where a root Slurm backend keeps its users' output
    folders in it (``spool/``: backends/slurm_spool.py) it stays traverse-only (0711),
    so that running jobs still reach them; nothing else in it is open to others."""
    os.umask(0o077)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o711 if (folder / "spool").is_dir() else 0o700)
    for name in ("ilucid.db", "ilucid.db-wal", "ilucid.db-shm", "admin.token"):
        path = folder / name
        if path.exists():
            path.chmod(0o600)


def db_url(args: argparse.Namespace) -> str:
    if args.db:
        return str(args.db)
    private_data_dir(args.data_dir)
    return f"sqlite:///{args.data_dir.resolve() / 'ilucid.db'}"


def migrate_or_refuse(url: str) -> None:
    """The database at ``url`` at the newest schema, or a one-line refusal (exit 2, no
    traceback) that says which version was found and what to do."""
    from ilucid.service.db import migrate
    from ilucid.service.unreadable import UnreadableDatabase

    try:
        migrate(url)
    except UnreadableDatabase as exc:
        raise CliError(str(exc)) from None


def release_held(args: argparse.Namespace) -> int:
    """Fail-open for a stopped service: its held jobs go to Slurm's own scheduler (with
    the GPU count they asked for, untyped). Run by hand or from a timer."""
    import time

    from ilucid.backends.slurm import SlurmBackend

    beat = args.data_dir / "heartbeat"
    if args.if_idle_for > 0 and beat.exists():
        idle = time.time() - beat.stat().st_mtime
        if idle < args.if_idle_for:
            print(f"the service completed a pass {idle:.0f} s ago: nothing released")
            return 0
    released = SlurmBackend(args.data_dir, slurm_conf=args.slurm_conf).release_all_held()
    print(f"released {len(released)} held job(s) to Slurm: {' '.join(map(str, released))}")
    return 0


def token(args: argparse.Namespace) -> int:
    from ilucid.service.auth import create_token
    from ilucid.service.db import make_engine

    url = db_url(args)
    migrate_or_refuse(url)
    engine = make_engine(url)
    if args.action == "revoke":
        from ilucid.service.auth import revoke_tokens

        gone = revoke_tokens(engine, args.user, args.tenant)
        print(f"revoked {gone} token(s) of {args.user}: they are refused from now on")
        return 0 if gone else 1
    if not args.tenant:
        raise ValueError("token create needs --tenant")
    print(create_token(engine, args.user, args.tenant, args.admin, args.unix_user))
    return 0

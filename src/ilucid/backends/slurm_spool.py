"""Where a Slurm job's output, error and exit files go, and how the service reads them.

Run as root, the service submits each job as its token's Unix account (``sbatch
--uid/--gid``): slurmstepd opens the job's output as that account and ilucid's batch
script writes the exit file as it. So these files live in a folder the account owns,
``<data>/spool/slurm/<account>/`` (0700), named ``<job id>.stdout.log``,
``.stderr.log`` and ``.exit``. The folders above it are root's and traverse-only
(0711, the data directory included) so that the account reaches its own folder and
lists nothing; every other entry of the data directory is kept without group or other
access (the database, the admin token and the service's own job folders stay
unreadable to jobs).

The service reads these files as root, so none is trusted: each is opened without
following a link, and read only as a regular file owned by the account (a job cannot
make the service show it the admin token through a link, a hard link to a root file,
or block it on a FIFO). Which folder and owner a job's files have is recorded in the
service's own job folder (``<data>/slurm/<id>/spool``), so a restarted service finds
them; a job without that record has its files in that job folder (a service that is
not root: the jobs run as the service's own account).
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ilucid.backends.accounts import Account
from ilucid.backends.file_tail import read_tail

__all__ = ["JobFiles", "Spool", "in_folder", "read_owned"]

#: what the service reads of an exit file (a number and a newline)
_EXIT_BYTES = 64


@dataclass(frozen=True, slots=True)
class JobFiles:
    """A job's three files, and the uid they must belong to (None: the service's own
    folder, written by the service's own account)."""

    stdout: Path
    stderr: Path
    exit: Path
    owner: int | None = None

    def stream(self, name: str) -> Path:
        return self.stdout if name == "stdout" else self.stderr

    def exit_code(self) -> int | None:
        """The code the batch script recorded, if it did."""
        data = read_owned(self.exit, self.owner, _EXIT_BYTES)
        text = (data or b"").decode("ascii", "replace").strip()
        return int(text) if text.lstrip("-").isdigit() else None


def in_folder(folder: Path) -> JobFiles:
    """The files of a job that runs as the service's own account: in its job folder."""
    return JobFiles(folder / "stdout.log", folder / "stderr.log", folder / "exit")


class Spool:
    """The per-account folders under ``<data>/spool/slurm`` (made and checked here)."""

    RECORD = "spool"

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.top = data_dir / "spool" / "slurm"

    def folder(self, account: Account) -> Path:
        """The account's own folder, made (or put right) now: 0700 and the account's,
        under root's traverse-only folders."""
        self.open_data_dir()
        for folder in (self.top.parent, self.top):
            _own_folder(folder, os.geteuid(), os.getegid(), 0o711)
        mine = self.top / account.name
        _own_folder(mine, account.uid, account.gid, 0o700)
        return mine

    def open_data_dir(self) -> None:
        """Traverse-only for everyone (0711), nothing in it open to anyone else."""
        os.chmod(self.data_dir, 0o711)
        for entry in os.scandir(self.data_dir):
            if entry.name == "spool" or entry.is_symlink():
                continue
            mode = entry.stat(follow_symlinks=False).st_mode
            if mode & 0o077:
                os.chmod(entry.path, stat.S_IMODE(mode) & ~0o077)

    def files(self, account: Account, job_id: str) -> JobFiles:
        """The job's files in its account's folder."""
        folder = self.folder(account)
        return JobFiles(
            folder / f"{job_id}.stdout.log",
            folder / f"{job_id}.stderr.log",
            folder / f"{job_id}.exit",
            account.uid,
        )

    def record(self, job_folder: Path, files: JobFiles) -> None:
        """Remember, in the service's job folder, where the job's files are."""
        (job_folder / self.RECORD).write_text(
            f"{files.owner}\n{files.stdout.parent}", encoding="utf-8"
        )

    def recorded(self, job_folder: Path) -> JobFiles:
        """Where the job's files are: its record, else its job folder."""
        try:
            owner, folder = (job_folder / self.RECORD).read_text(encoding="utf-8").split("\n")
        except (OSError, ValueError):
            return in_folder(job_folder)
        job_id = job_folder.name
        where = Path(folder)
        return JobFiles(
            where / f"{job_id}.stdout.log",
            where / f"{job_id}.stderr.log",
            where / f"{job_id}.exit",
            int(owner),
        )


def _own_folder(folder: Path, uid: int, gid: int, mode: int) -> None:
    """``folder`` exists as a real folder (never a link) of ``uid``:``gid`` and ``mode``."""
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=mode)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise ValueError(f"spool folder {folder}: not a folder (a link or a file is there)")
    if (info.st_uid, info.st_gid) != (uid, gid):
        os.chown(folder, uid, gid, follow_symlinks=False)
    if stat.S_IMODE(info.st_mode) != mode:
        os.chmod(folder, mode, follow_symlinks=False)


def read_owned(path: Path, owner: int | None, tail_bytes: int) -> bytes | None:
    """:func:`read_tail`'s bytes."""
    tail = read_tail(path, owner, tail_bytes)
    return tail.data if tail is not None else None

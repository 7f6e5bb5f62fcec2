"""What holds all of a job's processes, so a stop or an end reaches every one of them.

A process group is not enough: ``setsid`` or a double fork leaves it, and such a
process would run on with the job's GPUs after the scheduler freed them. Where a
writable cgroup v2 hierarchy exists (root, or a delegated subtree), each job gets
its own cgroup ``<root>/job-<id>``: the runner's child joins it before it drops
privileges, nothing the job does can leave it, ``cgroup.kill`` ends it whole, and
``memory.max`` / ``cpu.max`` enforce the job's ``memory_gb`` and ``cpus`` where
those controllers are enabled. Elsewhere the backend falls back to finding the
job's processes by the marker every one of them inherits in its environment
(``ILUCID_JOB_MARKER=<data directory's hash>/<id>``), which a process that clears
its environment escapes: :meth:`Containment.describe` says which is in force and why.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

__all__ = [
    "CgroupContainment",
    "Containment",
    "MarkerContainment",
    "choose_containment",
    "find_cgroup2",
    "marker_value",
    "scope_of",
]

#: the environment variable whose value (``<scope>/<job id>``) marks a job's processes
MARKER = "ILUCID_JOB_MARKER"
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class Containment(Protocol):
    """Finds and ends every process of a job, wherever it went; ``group_for`` is the
    cgroup the runner's child joins (None: it joins none)."""

    def group_for(self, job_id: str) -> str | None: ...
    def prepare(self, job_id: str, cpus: float | None, memory_gb: float | None) -> None: ...
    def pids(self, job_id: str, exclude: Iterable[int] = ()) -> list[int]: ...
    def kill(self, job_id: str, exclude: Iterable[int] = ()) -> None: ...
    def release(self, job_id: str) -> None: ...
    def describe(self) -> str: ...


def scope_of(data_dir: Path) -> str:
    """A short name of one service's data directory: two services never share a job's
    cgroup or marker, even with the same job ids."""
    return hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:12]


def marker_value(scope: str, job_id: str) -> str:
    return f"{scope}/{job_id}"


def _check_id(job_id: str) -> str:
    if not _SAFE_ID.match(job_id):
        raise ValueError(f"job id {job_id!r} is not a safe file name")
    return job_id


def _send(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


class CgroupContainment:
    """One cgroup v2 per job under ``root`` (a directory this service may write)."""

    def __init__(self, root: Path, controllers: frozenset[str], missing: str) -> None:
        self.root = root
        self.controllers = controllers
        self._missing = missing

    def _dir(self, job_id: str) -> Path:
        return self.root / f"job-{_check_id(job_id)}"

    def group_for(self, job_id: str) -> str | None:
        return str(self._dir(job_id))

    def prepare(self, job_id: str, cpus: float | None, memory_gb: float | None) -> None:
        """An empty cgroup for the job (an earlier launch's leftovers are ended first),
        with its limits where the controllers allow."""
        folder = self._dir(job_id)
        folder.mkdir(exist_ok=True)
        if self.pids(job_id):
            self.kill(job_id)
        if memory_gb and "memory" in self.controllers:
            (folder / "memory.max").write_text(str(int(memory_gb * 2**30)))
        if cpus and "cpu" in self.controllers:
            (folder / "cpu.max").write_text(f"{max(1000, int(cpus * 100_000))} 100000")

    def pids(self, job_id: str, exclude: Iterable[int] = ()) -> list[int]:
        folder = self._dir(job_id)
        found: list[int] = []
        with contextlib.suppress(FileNotFoundError):
            for procs in [folder / "cgroup.procs", *folder.glob("**/cgroup.procs")][:1000]:
                with contextlib.suppress(FileNotFoundError):
                    found += [int(line) for line in procs.read_text().split()]
        skip = set(exclude)
        return sorted({pid for pid in found if pid not in skip})

    def kill(self, job_id: str, exclude: Iterable[int] = ()) -> None:
        """SIGKILL every process of the cgroup (``cgroup.kill``: atomically, forks
        included), then wait a moment for the kernel to empty it."""
        kill_file = self._dir(job_id) / "cgroup.kill"
        try:
            kill_file.write_text("1")
        except OSError:  # a kernel before 5.14: one process at a time, until none is left
            for _ in range(10):
                pids = self.pids(job_id)
                if not pids:
                    break
                for pid in pids:
                    _send(pid, signal.SIGKILL)
        _wait_gone(lambda: self.pids(job_id))

    def release(self, job_id: str) -> None:
        folder = self._dir(job_id)
        for child in sorted(folder.glob("**/"), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                child.rmdir()

    def describe(self) -> str:
        limits = (
            "memory.max and cpu.max enforce each job's memory_gb and cpus"
            if {"memory", "cpu"} <= self.controllers
            else f"memory_gb and cpus are booked, not enforced: {self._missing}"
        )
        return f"containment: cgroup v2, one cgroup per job under {self.root}; {limits}"


class MarkerContainment:
    """No writable cgroup v2: a job's processes are those whose environment carries its
    marker (what every process it starts inherits, unless it clears its environment)."""

    def __init__(self, why: str, scope: str) -> None:
        self.why = why
        self.scope = scope

    def group_for(self, job_id: str) -> str | None:
        return None

    def prepare(self, job_id: str, cpus: float | None, memory_gb: float | None) -> None:
        if self.pids(job_id):
            self.kill(job_id)

    def pids(self, job_id: str, exclude: Iterable[int] = ()) -> list[int]:
        marker = f"{MARKER}={marker_value(self.scope, _check_id(job_id))}".encode()
        skip = set(exclude)
        skip.add(os.getpid())
        found = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) in skip:
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as handle:
                    environ = handle.read()
            except OSError:
                continue
            if marker in environ.split(b"\0"):
                found.append(int(entry.name))
        return sorted(found)

    def kill(self, job_id: str, exclude: Iterable[int] = ()) -> None:
        for _ in range(10):
            pids = self.pids(job_id, exclude)
            if not pids:
                return
            for pid in pids:
                _send(pid, signal.SIGKILL)
            _wait_gone(lambda: self.pids(job_id, exclude), 0.2)

    def release(self, job_id: str) -> None:
        return None

    def describe(self) -> str:
        return (
            f"containment: processes found by their {MARKER} marker in /proc/*/environ (a"
            f" process that clears its environment escapes it), because {self.why}"
        )


def _wait_gone(pids: Callable[[], list[int]], timeout_s: float = 1.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and pids():
        time.sleep(0.01)


def find_cgroup2() -> tuple[Path, Path] | str:
    """The cgroup v2 mount point and this process's own cgroup in it, or why there is none."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError as exc:
        return f"/proc/self/mountinfo cannot be read ({exc.strerror})"
    for line in mounts:
        before, _, after = line.partition(" - ")
        if after.split(" ", 1)[0] == "cgroup2":
            mount = Path(before.split()[4])
            break
    else:
        return "no cgroup v2 hierarchy is mounted"
    own = "/"
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                own = line[3:] or "/"
    return mount, mount / own.lstrip("/")


def _enable(folder: Path, mount: Path, wanted: tuple[str, ...]) -> frozenset[str]:
    """Enable ``wanted`` controllers from the mount down to ``folder``'s children (where
    each level offers them); the ones enabled for ``folder``'s children."""
    chain = [p for p in reversed(folder.parents) if p == mount or mount in p.parents]
    for level in [*chain, folder]:
        available = set((level / "cgroup.controllers").read_text().split())
        for name in wanted:
            if name in available:
                with contextlib.suppress(OSError):
                    (level / "cgroup.subtree_control").write_text(f"+{name}")
    return frozenset((folder / "cgroup.subtree_control").read_text().split()) & set(wanted)


def choose_containment(data_dir: Path, root: Path | None = None) -> Containment:
    """A cgroup per job under ``root`` (default: ``ilucid.slice/data-<hash>`` below this
    process's own cgroup, one subtree per data directory, so two services never share
    a job's cgroup) when it can be made and written, else the marker fallback."""
    scope = scope_of(data_dir)
    found = find_cgroup2()
    if isinstance(found, str):
        return MarkerContainment(found, scope)
    mount, own = found
    if root is None:
        root = own / "ilucid.slice" / f"data-{scope}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f"probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        try:
            writable = os.access(probe / "cgroup.procs", os.W_OK)
            killable = (probe / "cgroup.kill").exists()
        finally:
            probe.rmdir()
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            reason += " (not root, and no cgroup subtree is delegated to this user)"
        return MarkerContainment(f"the cgroup {root} cannot be made: {reason}", scope)
    if not writable:
        return MarkerContainment(f"the cgroup {root} is not writable by this user", scope)
    try:
        enabled = _enable(root, mount, ("memory", "cpu"))
        offered = (mount / "cgroup.controllers").read_text().split()
    except OSError:
        enabled, offered = frozenset(), []
    missing = sorted({"memory", "cpu"} - enabled)
    why = (
        f"the {' and '.join(missing)} controller(s) are not enabled in this cgroup v2"
        f" hierarchy (it offers: {', '.join(sorted(offered)) or 'none'})"
        if missing
        else ""
    )
    if not killable:
        why += "; no cgroup.kill (a kernel before 5.14): processes are killed one by one"
    return CgroupContainment(root, enabled, why)

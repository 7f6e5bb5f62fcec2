"""The local backend: jobs as process groups on this host, one GPU set each.

Each job runs under :mod:`ilucid.backends.runner` in its own session (process
group) with ``CUDA_VISIBLE_DEVICES`` set to its GPUs; stdout and stderr go to
``<data>/jobs/<id>/stdout.log`` and ``stderr.log``. What a restarted service
needs is on disk: ``pid`` (process id and its kernel start time, so a reused
pid is not mistaken for the job), ``gpus`` and, once it ended, ``exit``.
Stopping sends a configurable signal to the group (the job may checkpoint)
and SIGKILL after a grace period.

Jobs never run with the service's privileges. When the service runs as root,
each job runs as the identity its ``run_as`` names: its token's Unix account, or
a dynamic uid of its own (``#61184``, given by the service). The runner
(:mod:`ilucid.backends.runner`, copied into the private data directory and run
as ``python -I``) stays root only to contain the job, copy its output into its
capped logs and record its exit code; it drops groups, gid and uid before it
enters the job's directory. Each job's processes are held by a cgroup of its own
where one can be made, else found by their marker (:mod:`ilucid.backends.
containment`): a job counts as ended, and its GPUs as free, only once none of its
processes is left. The job's environment is the service's minus anything that
looks like a secret (``ILUCID_*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``,
``*KEY``...). The data directory is the service's alone (0700), so a job can read
neither the database, the admin token nor other jobs' logs. A service that is not
root cannot switch users: its jobs run as itself, which the service says at start.

GPUs are discovered through NVML (``nvidia-ml-py``) when it is installed and
finds a driver; otherwise the backend offers a configured number of virtual
GPUs (for CPU-only machines and tests).

With ``profiler_gpus`` the host is shown to the core as two nodes: the last
``profiler_gpus`` GPUs form a node of their own (``<host>-profiler``) that a
profiling policy (lucid) can turn into its profiling pool, the rest form
``<host>``. GPU indices stay the host's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ilucid.backends.accounts import Account, job_account
from ilucid.backends.base import NotAllowed, Observation, ObservedJob, ProcessState
from ilucid.backends.containment import (
    MARKER,
    Containment,
    choose_containment,
    marker_value,
    scope_of,
)
from ilucid.backends.enter_check import can_enter
from ilucid.backends.local_host import GpuInventory, HostResources, discover_gpus, discover_host
from ilucid.backends.progress_files import newest, read_output_tail, read_progress_file
from ilucid.backends.progress_memo import ProgressMemo
from ilucid.backends.progress_read import Progress
from ilucid.backends.runner_install import can_hide_proc, install_runner
from ilucid.core import Cluster, Node
from ilucid.core.policies.lucid import PROFILER_LABEL
from ilucid.progress import ENV as PROGRESS_ENV

__all__ = [
    "DEFAULT_MAX_LOG_MB",
    "LocalBackend",
    "job_environment",
]

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: the cap on each of a job's two logs, MB (``ilucid serve --max-log-mb``)
DEFAULT_MAX_LOG_MB = 100.0
#: logs of ended jobs older than this are removed (``ilucid serve --log-retention-days``)
DEFAULT_LOG_RETENTION_DAYS = 30.0
_SECRET_NAME = re.compile(
    r"^ILUCID_|TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|(^|_)KEY($|_)|^AWS_|^PG", re.IGNORECASE
)


def job_environment(
    base: Mapping[str, str], extra: Mapping[str, str] | None, account: Account | None
) -> dict[str, str]:
    """The environment a job starts with: ``base`` without what looks like a secret,
    the account's identity when the job runs as another user, then ``extra``."""
    env = {k: v for k, v in base.items() if not _SECRET_NAME.search(k)}
    if account is not None:
        env.update(HOME=account.home, USER=account.name, LOGNAME=account.name, SHELL=account.shell)
    env.update(extra or {})
    return env


def runner_exit_argument(exit_file: Path) -> str:
    """The runner's argument naming its exit file: written at launch and looked for in
    ``/proc`` when a crash beat the pid file (one spelling, so both always agree)."""
    return f"--exit={exit_file}"


def _ids(ids: Sequence[int]) -> str:
    return ",".join(map(str, ids))


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (field 22 of /proc/pid/stat), or None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    if fields and fields[0] == "Z":
        return None  # a zombie has ended
    return fields[19] if len(fields) > 19 else None


class LocalBackend:
    name = "local"

    def __init__(
        self,
        data_dir: Path,
        gpus: GpuInventory | None = None,
        stop_signal: int = signal.SIGTERM,
        grace_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        profiler_gpus: int = 0,
        host_resources: HostResources | None = None,
        max_log_mb: float = DEFAULT_MAX_LOG_MB,
        log_retention_days: float = DEFAULT_LOG_RETENTION_DAYS,
        containment: Containment | None = None,
    ) -> None:
        # absolute: the runner, the job and a restarted service all read these paths,
        # none of them from the directory the service was started in
        self.data_dir = Path(data_dir).resolve()
        self.root = self.data_dir / "jobs"
        self.root.mkdir(parents=True, exist_ok=True)
        #: root can run each job as its own user; anyone else runs jobs as itself
        self.switches_users = os.geteuid() == 0
        if not max_log_mb > 0 or not log_retention_days > 0:
            raise ValueError("max_log_mb and log_retention_days must be > 0")
        self.max_log_bytes = int(max_log_mb * 2**20)
        self.log_retention_s = log_retention_days * 86400.0
        self._pruned_at: float | None = None
        self.runner = install_runner(self.data_dir)
        self.containment = containment or choose_containment(self.data_dir)
        #: jobs see only their own user's processes (a private /proc with hidepid)
        self.hides_proc = self.switches_users and can_hide_proc(self.runner)
        self.gpus = gpus or discover_gpus()
        self.stop_signal = stop_signal
        self.grace_s = grace_s
        self.clock = clock
        count = self.gpus.count
        if not 0 <= profiler_gpus < count:
            raise ValueError(
                f"profiler_gpus must be between 0 and {count - 1} (this host has {count} GPUs)"
            )
        host = socket.gethostname() or "localhost"
        sizes = [(host, count - profiler_gpus)]
        if profiler_gpus:
            sizes.append((f"{host}-profiler", profiler_gpus))
        nodes: list[Node] = []
        self._ranges: dict[str, range] = {}
        first = 0
        resources = host_resources or discover_host()
        for name, size in sizes:
            labels = {PROFILER_LABEL: "yes"} if name.endswith("-profiler") else {}
            # a host split in two logical nodes books each against all its CPUs and
            # memory (profiling runs are short): a split by GPUs would refuse a job
            # half the host's CPUs on a small machine
            nodes.append(
                Node(
                    name,
                    size,
                    self.gpus.gpu_type,
                    self.gpus.memory_gb,
                    labels,
                    cpus=resources.cpus,
                    memory_gb=resources.memory_gb,
                )
            )
            self._ranges[name] = range(first, first + size)
            first += size
        self.cluster = Cluster(tuple(nodes))
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._stopping: dict[str, float] = {}  # job id -> SIGKILL deadline
        #: each running job's last progress report, read at most every 10 s
        self._progress = ProgressMemo(clock)

    def describe_isolation(self) -> list[str]:
        """What the service says at start about how jobs are held and hidden."""
        lines = [self.containment.describe()]
        if self.switches_users:
            lines.append(
                "jobs see only their own user's processes (a private /proc, hidepid)"
                if self.hides_proc
                else "jobs can list other users' processes: a private /proc with hidepid"
                " cannot be mounted here"
            )
        lines.append(
            f"job logs: at most {self.max_log_bytes / 2**20:g} MB a stream (head and"
            f" rolling tail kept); removed {self.log_retention_s / 86400:g} days after"
            " the job ended"
        )
        return lines

    def needs_account(self) -> bool:
        return self.switches_users

    # -- files -----------------------------------------------------------------------
    def _dir(self, job_id: str) -> Path:
        if not _SAFE_ID.match(job_id):
            raise ValueError(f"job id {job_id!r} is not a safe file name")
        return self.root / job_id

    def _read(self, job_id: str, name: str) -> str | None:
        try:
            return (self._dir(job_id) / name).read_text(encoding="utf-8").strip()
        except OSError:
            return None

    def _written_at(self, job_id: str, name: str) -> float | None:
        """When the job's file was last written: the runner writes ``exit`` once, as the
        job ends, so a restarted service knows when a job it did not watch ended."""
        try:
            return (self._dir(job_id) / name).stat().st_mtime
        except OSError:
            return None

    # -- protocol ----------------------------------------------------------------------
    def observe(self) -> Observation:
        self._prune_old_logs()
        jobs: dict[str, ObservedJob] = {}
        for folder in sorted(self.root.iterdir()):
            # ``gpus`` is written before the launch, ``pid`` right after it
            if not folder.is_dir() or not (folder / "gpus").exists():
                continue
            if not (folder / "pid").exists() and not (folder / "exit").exists():
                self._recover_pid(folder)
            jobs[folder.name] = self._observe_one(folder.name)
        self._progress.end_pass(j for j, seen in jobs.items() if seen.state is ProcessState.RUNNING)
        return Observation(self.cluster, jobs)

    def parts_of(self, gpus: Sequence[int]) -> tuple[tuple[str, int], ...]:
        """The logical nodes holding these host GPU indices, with how many on each."""
        return tuple(
            (name, count)
            for name, indices in self._ranges.items()
            if (count := sum(1 for g in gpus if g in indices))
        )

    def _observe_one(self, job_id: str) -> ObservedJob:
        gpus = tuple(int(g) for g in (self._read(job_id, "gpus") or "").split(",") if g)
        child = self._children.get(job_id)
        if child is not None:
            child.poll()  # reap our own child so it does not linger as a zombie
        pid_text = (self._read(job_id, "pid") or "").split()
        runner_alive = (
            len(pid_text) == 2
            and pid_text[0].isdigit()
            and _start_time(int(pid_text[0])) == pid_text[1]
        )
        # the exit file is read after the runner was seen, never before: a runner that
        # writes it and exits between the two reads would look gone without an exit
        # (vanished, then retried: a job run twice)
        exit_text = self._read(job_id, "exit")
        alive = exit_text is None and runner_alive
        if not alive and not self._none_left(job_id):
            # its main process ended; what it left behind holds its GPUs until gone
            return ObservedJob(job_id, ProcessState.STOPPING, gpus, parts=self.parts_of(gpus))
        if exit_text is not None:
            self._children.pop(job_id, None)
            self._stopping.pop(job_id, None)
            return ObservedJob(
                job_id,
                ProcessState.EXITED,
                gpus,
                int(exit_text),
                self.parts_of(gpus),
                ended_at=self._written_at(job_id, "exit"),
            )
        if not alive:
            self._children.pop(job_id, None)
            deadline = self._stopping.pop(job_id, None)
            if deadline is not None:  # killed after its grace period: no exit file
                return ObservedJob(
                    job_id, ProcessState.EXITED, gpus, -int(signal.SIGKILL), self.parts_of(gpus)
                )
            return ObservedJob(job_id, ProcessState.LOST, gpus, parts=self.parts_of(gpus))
        deadline = self._stopping.get(job_id)
        if deadline is not None:
            if self.clock() >= deadline:
                self.containment.kill(job_id, exclude=[int(pid_text[0])])
                self._signal(int(pid_text[0]), signal.SIGKILL)
            return ObservedJob(job_id, ProcessState.STOPPING, gpus, parts=self.parts_of(gpus))
        progress = self._progress.get(job_id, lambda: self._read_progress(job_id))
        return ObservedJob(
            job_id, ProcessState.RUNNING, gpus, parts=self.parts_of(gpus), progress=progress
        )

    def _read_progress(self, job_id: str) -> Progress | None:
        """The job's newest report: from the end of its stdout, or from its progress
        file (read only as the job's own user's file), whichever was written last."""
        folder = self._dir(job_id)
        said = read_output_tail(folder / "stdout.log")
        where = (self._read(job_id, "progress") or "").split("\n")
        if len(where) != 2 or not where[0].isdigit():
            return newest(said)
        return newest(said, read_progress_file(where[1], owner=int(where[0])))

    def _progress_folder(self, job_id: str, account: Account | None) -> str:
        """A fresh folder only the job's user may write, for its progress file: in the
        system's temporary directory (the data directory is the service's alone), made
        by the service with a name nobody can guess, then handed to that user. Where
        it is (and whose it is) is kept in the job's ``progress`` file."""
        self._drop_progress_folder(job_id)
        made = tempfile.mkdtemp(prefix=f"ilucid-progress-{job_id}-")
        uid = os.geteuid()
        if account is not None:
            os.chown(made, account.uid, account.gid)
            uid = account.uid
        path = os.path.join(made, "progress.json")
        (self._dir(job_id) / "progress").write_text(f"{uid}\n{path}", encoding="utf-8")
        return path

    def _drop_progress_folder(self, job_id: str) -> None:
        """Remove the job's progress folder (a link put in its place is not followed)."""
        where = (self._read(job_id, "progress") or "").split("\n")
        if len(where) == 2:
            shutil.rmtree(os.path.dirname(where[1]), ignore_errors=True)
        (self._dir(job_id) / "progress").unlink(missing_ok=True)

    def _none_left(self, job_id: str) -> bool:
        """Whether no process of the job is left; any that outlived its main process
        (``setsid``, a double fork) is killed now, and the cgroup goes once empty."""
        if self.containment.pids(job_id):
            self.containment.kill(job_id)
            if self.containment.pids(job_id):
                return False
        self.containment.release(job_id)
        return True

    def _prune_old_logs(self, every_s: float = 3600.0) -> None:
        """Remove the folders (logs) of ended jobs whose logs are older than the
        retention; at most once an hour."""
        now = self.clock()
        if self._pruned_at is not None and now - self._pruned_at < every_s:
            return
        self._pruned_at = now
        oldest = time.time() - self.log_retention_s
        for folder in self.root.iterdir():
            if not folder.is_dir() or (folder / "gpus").exists():
                continue  # a job the service still tracks
            logs = [folder / name for name in ("stdout.log", "stderr.log")]
            newest = max((p.stat().st_mtime for p in logs if p.exists()), default=0.0)
            if newest < oldest:
                shutil.rmtree(folder, ignore_errors=True)

    def _recover_pid(self, folder: Path) -> None:
        """A service killed between launching a job and writing its pid: find the
        job's wrapper by its command line (it names the job's exit file)."""
        marker = runner_exit_argument(folder / "exit").encode()
        runner = str(self.runner).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker in argv and runner in argv:
                pid = int(entry.name)
                (folder / "pid").write_text(f"{pid} {_start_time(pid) or ''}", encoding="utf-8")
                return

    def _held(self) -> dict[int, list[int]]:
        """Running jobs per GPU index, as the milli-GPUs each takes (1000: whole)."""
        held: dict[int, list[int]] = {}
        for job in self.observe().jobs.values():
            if job.state in (ProcessState.RUNNING, ProcessState.STOPPING):
                milli = int(self._read(job.job_id, "milli") or 1000)
                for gpu in job.gpus:
                    held.setdefault(gpu, []).append(milli)
        return held

    def _already_running(self, job_id: str) -> tuple[int, ...] | None:
        """The GPUs of this job's live process, if it has one: never start a job twice."""
        if (self._dir(job_id) / "pid").exists():
            seen = self._observe_one(job_id)
            if seen.state in (ProcessState.RUNNING, ProcessState.STOPPING):
                return seen.gpus
        return None

    def start(
        self,
        job_id: str,
        command: Sequence[str],
        gpus: int,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        placement: Sequence[tuple[str, int]] | None = None,
        run_as: str | None = None,
        cpus: float | None = None,
        memory_gb: float | None = None,
    ) -> tuple[int, ...] | None:
        """Run the job on the placement's GPUs. ``cpus`` and ``memory_gb`` are booked by
        the core and enforced by the job's cgroup where its cpu and memory controllers
        are enabled (``ilucid serve`` says at start whether they are)."""
        if not command:
            raise ValueError(f"job {job_id}: empty command")
        if placement is not None:
            unknown = [name for name, _ in placement if name not in self._ranges]
            if unknown or sum(n for _, n in placement) != gpus:
                raise ValueError(
                    f"job {job_id}: placement {list(placement)} does not fit this host's"
                    f" nodes {list(self._ranges)} or its {gpus} GPUs"
                )
        running = self._already_running(job_id)
        if running is not None:
            return running
        busy = self._held()
        wanted = placement if placement is not None else [(name, 0) for name in self._ranges]
        chosen_list: list[int] = []
        for name, count in wanted:
            free = [g for g in self._ranges[name] if g not in busy]
            if placement is None:  # no hint: lowest free indices anywhere
                count = min(len(free), gpus - len(chosen_list))
            if len(free) < count:
                return None  # a stopping job still holds them; try again on the next pass
            chosen_list += free[:count]
        if len(chosen_list) < gpus:
            return None
        return self._launch(
            job_id, command, tuple(chosen_list), env, cwd, run_as, 1000, cpus, memory_gb
        )

    def start_shared(
        self,
        job_id: str,
        command: Sequence[str],
        node: str,
        milli: int,
        on_gpus: Sequence[int] | None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        run_as: str | None = None,
    ) -> tuple[int, ...] | None:
        """Jobs of one share get the same ``CUDA_VISIBLE_DEVICES``; whatever they run
        must fit their share of its memory themselves (nothing here enforces it)."""
        if not command:
            raise ValueError(f"job {job_id}: empty command")
        if node not in self._ranges or not 0 < milli < 1000:
            raise ValueError(f"job {job_id}: no share of {milli} milli-GPUs on node {node!r}")
        running = self._already_running(job_id)
        if running is not None:
            return running
        held = self._held()
        if on_gpus is None:  # opening the share: a GPU nobody holds
            free = [g for g in self._ranges[node] if g not in held]
            chosen = tuple(free[:1])
        elif all(
            g in self._ranges[node]
            and 1000 not in held.get(g, [])
            and sum(held.get(g, [])) + milli <= 1000
            for g in on_gpus
        ):
            chosen = tuple(on_gpus)
        else:
            chosen = ()
        if not chosen:
            return None  # a stopping job still holds it; try again on the next pass
        return self._launch(job_id, command, chosen, env, cwd, run_as, milli)

    def _launch(
        self,
        job_id: str,
        command: Sequence[str],
        chosen: tuple[int, ...],
        env: Mapping[str, str] | None,
        cwd: str | None,
        run_as: str | None,
        milli: int = 1000,
        cpus: float | None = None,
        memory_gb: float | None = None,
    ) -> tuple[int, ...]:
        folder = self._dir(job_id)
        account = self._account(job_id, run_as)
        if cwd is None:  # its home, or / (a dynamic uid has none)
            home = account.home if account is not None else os.path.expanduser("~")
            cwd = home if os.path.isdir(home) else "/"
        elif not os.path.isdir(cwd):  # gone since submission: the launch fails (retried)
            raise ValueError(f"cwd {cwd!r}: no such directory on this host")
        folder.mkdir(parents=True, exist_ok=True)
        for stale in ("exit", "exit.tmp", "pid", "milli"):
            (folder / stale).unlink(missing_ok=True)
        self.containment.prepare(job_id, cpus, memory_gb)  # empty: no leftover runs on
        if milli < 1000:  # written before ``gpus``: a job listed as running has its share
            (folder / "milli").write_text(str(milli), encoding="utf-8")
        (folder / "gpus").write_text(",".join(map(str, chosen)), encoding="utf-8")
        full_env = job_environment(os.environ, env, account)
        full_env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, chosen))
        full_env["ILUCID_JOB_ID"] = job_id
        full_env[PROGRESS_ENV] = self._progress_folder(job_id, account)
        full_env[MARKER] = marker_value(scope_of(self.data_dir), job_id)
        identity = (
            [f"--uid={account.uid}", f"--gid={account.gid}", f"--groups={_ids(account.groups)}"]
            if account is not None
            else []
        )
        group = self.containment.group_for(job_id)
        runner = [
            sys.executable,
            "-I",  # isolated: no cwd, user site or PYTHON* variable reaches sys.path
            str(self.runner),
            runner_exit_argument(folder / "exit"),
            f"--stdout={folder / 'stdout.log'}",
            f"--stderr={folder / 'stderr.log'}",
            f"--max-log-bytes={self.max_log_bytes}",
            f"--cwd={cwd}",
            *identity,
            *([f"--cgroup={group}"] if group else []),
            *(["--hide-proc"] if self.hides_proc else []),
            "--",
            *command,
        ]
        # the runner's own complaints (never the job's output) go to its stderr log
        with (folder / "stderr.log").open("ab") as err:
            child = subprocess.Popen(
                runner,
                stdout=err,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=full_env,
                cwd="/",  # nothing of the job's user is entered as root
                start_new_session=True,
            )
        started = _start_time(child.pid) or ""
        (folder / "pid").write_text(f"{child.pid} {started}", encoding="utf-8")
        self._children[job_id] = child
        return chosen

    def _account(self, job_id: str, run_as: str | None) -> Account | None:
        """Whom the job runs as: None when the service is not root (it runs as itself)."""
        if not self.switches_users:
            return None
        if run_as is None:
            raise ValueError(
                f"job {job_id}: no Unix account to run it as (a root service never runs a"
                " job as itself; the service gives each token an account or a dynamic uid)"
            )
        return job_account(run_as)

    def check(self, command: Sequence[str], cwd: str | None, run_as: str | None = None) -> None:
        """Refuse at submission what would only fail at launch: a directory that is
        missing, or that the job's account cannot enter (a yes is remembered for a few
        seconds: :mod:`~ilucid.backends.enter_check`)."""
        if cwd is None:
            return
        if not os.path.isdir(cwd):
            raise ValueError(f"cwd {cwd!r}: no such directory on this host")
        account = self._account("", run_as) if run_as is not None else None
        if account is None:
            if not os.access(cwd, os.X_OK):
                raise NotAllowed(f"cwd {cwd!r}: this service's user cannot enter it")
            return
        # asked as the account itself: the kernel checks every directory on the way
        if not can_enter(account, cwd):
            raise NotAllowed(
                f"cwd {cwd!r}: the job's account {account.name} (uid {account.uid}) cannot"
                " enter it; submit from a directory it can enter (every directory on the way"
                " needs o+x, or the account's group), pass --cwd, or map your token to your"
                " own Unix account (ilucid token create --unix-user NAME)"
            )

    def stop(self, job_id: str) -> None:
        pid_text = (self._read(job_id, "pid") or "").split()
        if len(pid_text) != 2 or _start_time(int(pid_text[0])) != pid_text[1]:
            return
        if job_id not in self._stopping:
            self._stopping[job_id] = self.clock() + self.grace_s
            group = int(pid_text[0])
            self._signal(group, self.stop_signal)
            # and every process of the job that left the group (setsid, double fork);
            # those still in it got the signal once, from the group
            for pid in self.containment.pids(job_id):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if os.getpgid(pid) != group:
                        os.kill(pid, self.stop_signal)

    @staticmethod
    def _signal(pid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)

    def logs(self, job_id: str, stream: str = "stdout", tail_bytes: int = 65536) -> str:
        if stream not in ("stdout", "stderr"):
            raise ValueError("stream must be stdout or stderr")
        path = self._dir(job_id) / f"{stream}.log"
        try:
            with path.open("rb") as handle:
                size = path.stat().st_size
                handle.seek(max(0, size - tail_bytes))
                return handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def log_cuts(self, job_id: str) -> dict[str, int]:
        cuts = {}
        for stream in ("stdout", "stderr"):
            text = self._read(job_id, f"{stream}.log.cut")
            if text and text.isdigit() and int(text):
                cuts[stream] = int(text)
        return cuts

    def pids(self, job_id: str) -> list[int]:
        """The job's processes (what NVML reports usage by): its containment's, which
        holds them all (the runner, root, is not one of them)."""
        return self.containment.pids(job_id)

    def forget(self, job_id: str) -> None:
        """Drop the on-disk state of an ended job (its logs are kept)."""
        self._drop_progress_folder(job_id)
        for name in ("pid", "exit", "gpus"):
            (self._dir(job_id) / name).unlink(missing_ok=True)

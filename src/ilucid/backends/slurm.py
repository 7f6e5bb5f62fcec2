"""The Slurm backend: ilucid's ordering and placement on top of an unmodified Slurm.

Each accepted job is submitted at once with ``sbatch --hold`` (so Slurm knows it and says
why it waits); when the core starts it, ilucid writes the chosen node and GPU type into the
held job (``scontrol update NodeList=... TresPerNode=gres:gpu:TYPE:N``) and releases it.
Preemption is ``scontrol requeuehold``: Slurm signals the job (it may checkpoint), puts it
back in the queue held, and ilucid releases it again when the core restarts it.

Everything runs as argument lists (never a shell); the job's command reaches Slurm as
arguments of ilucid's own batch script, which records the exit code in
``<data>/slurm/<id>/exit`` so an outcome survives Slurm forgetting a job (without
accounting, ended jobs leave ``squeue`` after ``MinJobAge``).

Slurm 22.05 facts this relies on (see docs/slurm.md): ``--json`` ignores filters, so one
``squeue --json`` per pass serves all jobs; a held job's typed GRES must be cleared
(``TresPerNode=``) before a new one is set; a requeued job waits ``cred_expire`` seconds
(BeginTime) unless its StartTime is reset, and resetting it in the same second as the
requeue fails the job, so a release waits ``requeue_delay_s`` after a requeue.

The inventory follows the cluster (``sinfo`` every pass; nodes Slurm gives no work are in
``excluded_nodes()`` with its reason). Cloud nodes (``State=CLOUD`` under Slurm's power
saving) are in the cluster whatever their power state, labelled ``pool=<name>``; ilucid
powers them up and down with ``scontrol update NodeName=X State=POWER_UP|POWER_DOWN`` and
Slurm's own ResumeProgram/SuspendProgram do the rest (docs/slurm.md, "Cloud nodes"). A
job Slurm requeued itself (its node went down:
restart count above the ``:run=N`` ilucid wrote in its comment at its last release) is held
again and reported HELD with the reason (docs/slurm.md).

Jobs run as their users (docs/slurm.md): a service that runs as root submits each job
as its token's Unix account (``sbatch --uid/--gid``; Slurm 22.05 onwards keeps these for
sbatch, while 23.02.5 dropped them from srun and salloc), with a cleaned environment
(nothing that looks like a secret), holds it as the administrator (``scontrol hold``:
the account cannot release its own job past ilucid, as it could a user hold) and has
its output in a folder that account owns (:mod:`ilucid.backends.slurm_spool`). A token
without an account is refused at submission, never run as root: dynamic uids are not
used here, as Slurm runs jobs only as accounts its nodes know (sbatch itself refuses an
unknown uid). A service that is not root runs every job as its own account, and says so
when it starts.

Failure mode (fail-closed): if ilucid stops, its held jobs stay held and running jobs run
on; a restarted service rebuilds from its database and Slurm's queue, matching jobs by name
(``ilucid-<id>``), so nothing is submitted twice. ``release_all_held`` is the fail-open
escape hatch an operator (or a timer) runs to hand held jobs to Slurm's own scheduler.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import re
import secrets
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ilucid.backends.accounts import DYNAMIC_PREFIX, Account, job_account
from ilucid.backends.base import (
    BackendUnavailable,
    ForeignJob,
    NotAllowed,
    Observation,
    ObservedJob,
    PowerState,
    ProcessState,
)
from ilucid.backends.enter_check import can_enter
from ilucid.backends.file_tail import read_tail
from ilucid.backends.local import job_environment
from ilucid.backends.progress_files import OUTPUT_TAIL_BYTES
from ilucid.backends.progress_memo import ProgressMemo
from ilucid.backends.progress_read import Progress, last_in_output
from ilucid.backends.slurm_parse import (
    SlurmJob,
    SlurmNode,
    check_command,
    check_name,
    expand_hostlist,
    foreign_job,
    host_resources,
    logical_cluster,
    parse_jobs,
    parse_nodes,
    released_run,
    tres_gpus,
    unavailable_reason,
    wait_status,
    with_run,
)
from ilucid.backends.slurm_power import power_state
from ilucid.backends.slurm_spool import JobFiles, Spool, in_folder, read_owned
from ilucid.core import Cluster

__all__ = ["SlurmBackend", "SlurmError"]

logger = logging.getLogger(__name__)

PREFIX = "ilucid-"
#: what an ilucid job id may look like in a Slurm job's name
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
#: Slurm job states in which the job holds (or is about to hold) its allocation
_ACTIVE = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STAGE_OUT"})
_ENDED = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "PREEMPTED",
    }
)
BATCH_SCRIPT = """#!/bin/sh
# ilucid's batch script: runs the job's command exactly as given (no shell parsing of
# it) and records the exit code, so the outcome outlives Slurm's memory of the job.
exit_file="$1"
shift
rm -f "$exit_file"
"$@"
code=$?
echo "$code" > "$exit_file.tmp" && mv "$exit_file.tmp" "$exit_file"
exit "$code"
"""


class SlurmError(BackendUnavailable):
    """Slurm did not answer (controller down, command missing); the pass is retried."""


class SlurmBackend:
    name = "slurm"

    def __init__(
        self,
        data_dir: Path,
        partition: str | None = None,
        slurm_conf: str | None = None,
        timeout_s: float = 20.0,
        requeue_delay_s: float = 1.5,
        clock: Callable[[], float] = time.monotonic,
        opt_in_tag: str = "ilucid",
    ) -> None:
        self.root = Path(data_dir).resolve() / "slurm"
        if "%" in str(self.root) or "," in str(self.root):
            raise ValueError(f"data dir {self.root}: Slurm paths may not hold '%' or ','")
        self.root.mkdir(parents=True, exist_ok=True)
        #: root submits each job as its token's account; anyone else as itself
        self.switches_users = os.geteuid() == 0
        self.spool = Spool(self.root.parent)
        self._files: dict[str, JobFiles] = {}  # ilucid id -> where its files are
        self._impostors: set[int] = set()  # Slurm ids of jobs named as ours, said once
        if self.switches_users and self.spool.top.is_dir():
            self.spool.open_data_dir()  # running jobs of a past start reach their folders
        self.script = self.root / "ilucid-batch.sh"
        self.script.write_text(BATCH_SCRIPT, encoding="utf-8")
        self.script.chmod(0o755)
        # job names carry this state directory's own tag, so two ilucid instances (or a
        # fresh database) never mistake each other's jobs in one Slurm queue for their own
        tag_file = self.root / "instance"
        if not tag_file.exists():
            tag_file.write_text(secrets.token_hex(3), encoding="utf-8")
        self.prefix = f"{PREFIX}{tag_file.read_text(encoding='utf-8').strip()}-"
        self.partition = check_name(partition, "partition") if partition else None
        self.env = dict(os.environ)
        if slurm_conf:
            self.env["SLURM_CONF"] = slurm_conf
        self.timeout_s = timeout_s
        self.requeue_delay_s = requeue_delay_s
        self.clock = clock
        self.opt_in_tag = check_name(opt_in_tag, "opt-in tag")
        self.cluster: Cluster | None = None
        self.where: dict[str, tuple[str, str | None]] = {}
        self._typed: list[str] = []
        self.excluded: dict[str, str] = {}  # logical node -> why Slurm gives it no work
        self._ran_on: dict[str, str] = {}  # ilucid id -> Slurm's node list where it ran
        self._node_reasons: dict[str, str] = {}  # Slurm node -> why it takes no work
        self.power: dict[str, PowerState] = {}  # logical cloud node -> its power state
        self._jobs: dict[str, list[SlurmJob]] = {}  # ilucid id -> its Slurm jobs
        self._foreign: list[ForeignJob] = []
        self._stopping: set[str] = set()
        self._requeued_at: dict[str, float] = {}
        #: each running job's last progress report (its ``stdout.log``), read at most
        #: every 10 s a job
        self._progress = ProgressMemo(clock)
        logger.info("%s", self.describe_identity())

    def describe_identity(self) -> str:
        """Whom the jobs run as: what the service says once, when it starts."""
        if self.switches_users:
            return (
                "Slurm jobs run as their token's Unix account (sbatch --uid/--gid), their"
                f" output in {self.spool.top}/<account>/; tokens without an account are"
                " refused (ilucid token create --unix-user ACCOUNT)"
            )
        user = _user_name(os.geteuid())
        return (
            f"Slurm jobs run as this service's own account {user} (uid {os.geteuid()}):"
            " only a service run as root submits each job as its token's Unix account"
        )

    def _account(self, job_id: str, run_as: str | None) -> Account | None:
        """Whom the job runs as: None when the service is not root (it runs as itself);
        as root, the token's Unix account, else a refusal (never root, no dynamic uid)."""
        if not self.switches_users:
            return None
        if run_as is None:
            whose = f"job {job_id}" if job_id else "this token"
            raise NotAllowed(
                f"run_as: {whose} has no Unix account, and this service (root) submits no"
                " Slurm job without one (never as root): map the token to an"
                " account every Slurm node knows (ilucid token create --user USER --tenant"
                " TENANT --unix-user ACCOUNT)"
            )
        if run_as.startswith(DYNAMIC_PREFIX):
            raise NotAllowed(
                f"run_as: {run_as} is a dynamic uid, which Slurm's nodes do not know (sbatch"
                " refuses it): map the token to a Unix account (ilucid token create --user"
                " USER --tenant TENANT --unix-user ACCOUNT)"
            )
        return job_account(run_as)

    def _files_of(self, job_id: str) -> JobFiles:
        """Where the job's output, error and exit files are (see slurm_spool)."""
        files = self._files.get(job_id)
        if files is None:
            files = self._files[job_id] = self.spool.recorded(self.root / job_id)
        return files

    # -- commands ----------------------------------------------------------------------
    def _run(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        try:
            done = subprocess.run(
                list(args),
                capture_output=True,
                text=True,
                env=self.env if env is None else env,
                timeout=self.timeout_s,
                check=False,
            )
        except FileNotFoundError:
            raise SlurmError(f"{args[0]} is not installed (Slurm's client commands)") from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{' '.join(args[:2])}: no answer in {self.timeout_s:g} s") from None
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip().splitlines()
            raise SlurmError(f"{' '.join(args[:2])} failed: {message[-1] if message else ''}")
        return done.stdout

    def _json(self, *args: str) -> dict[str, object]:
        text = self._run(*args)
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SlurmError(f"{args[0]} --json: unreadable output ({exc})") from None
        if not isinstance(document, dict):
            raise SlurmError(f"{args[0]} --json: expected an object")
        return document

    # -- observing -----------------------------------------------------------------------
    def _refresh(self) -> None:
        try:
            nodes = parse_nodes(self._json("sinfo", "--json"))
        except ValueError as exc:  # a field not as Slurm 22.05 writes it: say which
            raise SlurmError(str(exc)) from None
        self._inventory(nodes)
        ours: dict[str, list[SlurmJob]] = {}
        foreign: list[ForeignJob] = []
        for job in parse_jobs(self._json("squeue", "--json")):
            if job.name.startswith(self.prefix):
                job_id = job.name.removeprefix(self.prefix)
                if self._submitted_by_us(job_id, job):
                    ours.setdefault(job_id, []).append(job)
                elif job.job_id not in self._impostors:
                    self._impostors.add(job.job_id)
                    logger.warning(
                        "Slurm job %s is named as ilucid's job %r but runs as %s (uid %s),"
                        " not as the account ilucid submitted that job for: ignored",
                        job.job_id,
                        job_id,
                        job.user or "?",
                        job.user_id,
                    )
            elif self._opted_in(job):
                foreign.append(foreign_job(job))
        self._jobs = ours
        self._foreign = foreign

    def _inventory(self, nodes: list[SlurmNode]) -> None:
        """The nodes as Slurm says they are now: every GPU node of the partition is in the
        cluster (so running jobs stay accounted where they run), and those that take no
        new work (drained, down, ...) are in ``excluded`` with Slurm's reason."""
        cluster, where = logical_cluster(nodes, self.partition)
        if not cluster.nodes:
            raise SlurmError(f"no nodes with GPUs in partition {self.partition or '(any)'}")
        if cluster != self.cluster:  # a node came or went: a new inventory
            self.cluster, self.where = cluster, where
            self._typed = [node for node, _ in where.values()]  # a name per GPU type there
        why = {node.name: unavailable_reason(node) for node in nodes}
        self.excluded = {
            name: reason for name, (node, _) in where.items() if (reason := why.get(node))
        }
        self._node_reasons = {name: reason for name, reason in why.items() if reason}
        states = {node.name: power_state(node.flags) for node in nodes if node.cloud}
        self.power = {name: states[node] for name, (node, _) in where.items() if node in states}

    def excluded_nodes(self) -> dict[str, str]:
        """Logical nodes Slurm gives no new work at the last pass, with Slurm's reason
        (``drained: <reason>``, ``down: <reason>``)."""
        return dict(self.excluded)

    # -- cloud nodes (PowersNodes) ---------------------------------------------------------
    def power_states(self) -> dict[str, PowerState]:
        """The cloud nodes of the last observation (logical names, as in its cluster: the
        two halves of a node with two GPU types power up and down together)."""
        return dict(self.power)

    def power_up(self, node: str) -> None:
        """``scontrol update NodeName=X State=POWER_UP``: Slurm runs its ResumeProgram."""
        self._run("scontrol", "update", f"NodeName={self._cloud_node(node)}", "State=POWER_UP")

    def power_down(self, node: str) -> None:
        """``scontrol update NodeName=X State=POWER_DOWN``: Slurm runs its SuspendProgram.
        Refused while Slurm shows a job on the node (asked afresh: never under a job)."""
        name = self._cloud_node(node)
        for job in parse_jobs(self._json("squeue", "--json")):
            if job.state in _ACTIVE and name in expand_hostlist(job.nodes):
                ours = (
                    job.name.removeprefix(self.prefix) if job.name.startswith(self.prefix) else None
                )
                which = (
                    f"job {ours} (Slurm job {job.job_id})" if ours else f"Slurm job {job.job_id}"
                )
                raise ValueError(
                    f"power down {node}: Slurm shows {which} {job.state} on {name};"
                    " a node is released only when no job runs there"
                )
        self._run("scontrol", "update", f"NodeName={name}", "State=POWER_DOWN")

    def _cloud_node(self, node: str) -> str:
        """The Slurm node behind ``node`` (a logical name, or Slurm's own), which must be a
        cloud node of the last observation."""
        if self.cluster is None:
            self._refresh()
        physical = self.where[node][0] if node in self.where else node
        if not any(self.where[name][0] == physical for name in self.power):
            clouds = sorted({self.where[name][0] for name in self.power})
            raise ValueError(
                f"node {node}: not a cloud node (State=CLOUD) of this Slurm cluster;"
                f" its cloud nodes: {', '.join(clouds) or 'none'}"
            )
        return check_name(physical, "node")

    def _submitted_by_us(self, job_id: str, job: SlurmJob) -> bool:
        """A name proves nothing (any Slurm user may name a job so): ilucid's jobs run as
        the account it submitted them for, recorded beside the job, else as this service."""
        if not _JOB_ID.fullmatch(job_id):
            return False
        files = self._files.get(job_id) or self.spool.recorded(self.root / job_id)
        expected = files.owner if files.owner is not None else os.geteuid()
        uid = job.user_id
        if uid < 0:  # an squeue without user_id: its user name
            try:
                uid = pwd.getpwnam(job.user).pw_uid
            except KeyError:
                return False
        return uid == expected

    def _opted_in(self, job: SlurmJob) -> bool:
        tag = job.comment.split(":")[0]
        return tag == self.opt_in_tag and job.state == "PENDING" and not job.name.startswith(PREFIX)

    def _current(self, job_id: str) -> SlurmJob | None:
        """The Slurm job that stands for ``job_id``: a live one before an ended one."""
        jobs = self._jobs.get(job_id, [])
        live = [j for j in jobs if j.state not in _ENDED]
        pool = live or jobs
        return max(pool, key=lambda j: j.job_id) if pool else None

    def observe(self) -> Observation:
        self._refresh()
        assert self.cluster is not None
        observed: dict[str, ObservedJob] = {}
        for job_id in self._jobs:
            job = self._current(job_id)
            if job is not None:
                observed[job_id] = self._as_observed(job_id, job)
        self._progress.end_pass(
            j for j, seen in observed.items() if seen.state is ProcessState.RUNNING
        )
        for folder in self.root.iterdir():  # jobs Slurm forgot: their exit file tells
            if folder.is_dir() and folder.name not in observed:
                files = self._files_of(folder.name)
                code = files.exit_code() if files.exit.exists() else None
                if code is not None:
                    observed[folder.name] = ObservedJob(folder.name, ProcessState.EXITED, (), code)
        return Observation(self.cluster, observed)

    def _as_observed(self, job_id: str, job: SlurmJob) -> ObservedJob:
        gpus = tuple(g for _, indices in job.gres for g in indices)
        parts = self._parts(job)
        if job.state == "NODE_FAIL":  # not requeued: it is lost, not ended by itself
            self._stopping.discard(job_id)
            why = f"Slurm: NODE_FAIL on {job.nodes or self._ran_on.get(job_id, 'its node')}"
            return ObservedJob(job_id, ProcessState.LOST, (), None, parts, why)
        if job.state in _ENDED:
            self._stopping.discard(job_id)
            code = wait_status(job.exit_code)
            if job.state == "CANCELLED" and code == 0:
                code = -15
            return ObservedJob(job_id, ProcessState.EXITED, gpus, code, parts)
        if job.state == "PENDING" and job.reason.startswith("JobHeld"):
            self._stopping.discard(job_id)
            return ObservedJob(job_id, ProcessState.HELD, (), None, parts)
        if job_id in self._stopping:
            return ObservedJob(job_id, ProcessState.STOPPING, gpus, None, parts)
        run = released_run(job.comment)
        if run is not None and job.restarts > run:
            return self._take_back(job_id, job, run)
        if job.nodes:
            self._ran_on[job_id] = job.nodes
        # running, or released and waiting for Slurm to start it; its own progress
        # report, from the end of the output file ilucid's sbatch names (--output)
        files = self._files_of(job_id)
        progress = self._progress.get(job_id, lambda: _report(files))
        return ObservedJob(job_id, ProcessState.RUNNING, gpus, None, parts, progress=progress)

    def _take_back(self, job_id: str, job: SlurmJob, run: int) -> ObservedJob:
        """Slurm requeued a job ilucid released (its node went down or failed): hold it
        again so that only ilucid starts it, and say why it stopped."""
        nodes = expand_hostlist(self._ran_on.get(job_id, "") or job.nodes)
        down = [f"{n} is {self._node_reasons[n]}" for n in nodes if n in self._node_reasons]
        where = "; ".join(down) or (f"it ran on {', '.join(nodes)}" if nodes else "")
        why = f"Slurm requeued it (restart {job.restarts}, released at {run})" + (
            f": {where}" if where else ""
        )
        if job.state == "PENDING":
            self._run("scontrol", "hold", str(job.job_id))
            return ObservedJob(job_id, ProcessState.HELD, (), None, (), why)
        # Slurm already started it again, where ilucid did not decide: take it back
        self._stopping.add(job_id)
        self._requeue_held(job.job_id)
        self._requeued_at[job_id] = self.clock()
        return ObservedJob(job_id, ProcessState.STOPPING, (), None, (), why)

    def _requeue_held(self, slurm_id: int) -> None:
        """Requeue the job held. A requeue's hold is a user hold, which the job's own
        account could release past ilucid: root makes it an administrator's hold."""
        self._run("scontrol", "requeuehold", str(slurm_id))
        if self.switches_users:
            self._run("scontrol", "hold", str(slurm_id))

    def _parts(self, job: SlurmJob) -> tuple[tuple[str, int], ...]:
        """Where a running job is, as the core's logical nodes (empty if unknown). A job
        Slurm holds CONFIGURING on a node still powering up has its nodes but no GPU
        details yet (they come when the node registers, or not at all in a first
        answer): what it asked for a node stands for them until then."""
        names = expand_hostlist(job.nodes)
        gres = job.gres
        if not gres and names and job.state == "CONFIGURING":
            gpu_type, per_node = tres_gpus(job.tres_per_node)
            if per_node > 0:
                gres = tuple((gpu_type, tuple(range(per_node))) for _ in names)
        if not gres or len(names) != len(gres):
            return ()
        logical = {where: name for name, where in self.where.items()}
        parts = []
        for node, (gpu_type, indices) in zip(names, gres, strict=True):
            name = logical.get((node, gpu_type)) or logical.get((node, None))
            if name is None:
                return ()
            parts.append((name, len(indices)))
        return tuple(parts)

    def reason(self, job_id: str) -> str | None:
        """Slurm's own word on a job that is not running, for ilucid's explanations."""
        job = self._current(job_id)
        if job is None or job.state != "PENDING" or job.reason in ("", "None"):
            return None
        if job.reason.startswith("JobHeld"):
            return f"Slurm: {job.reason} (held until ilucid releases it)"
        return f"Slurm: {job.reason}" + (f" ({job.description})" if job.description else "")

    def foreign_jobs(self) -> list[ForeignJob]:
        """Pending jobs submitted straight to Slurm that opted in to ilucid."""
        return list(self._foreign)

    # -- acting -----------------------------------------------------------------------------
    def check(self, command: Sequence[str], cwd: str | None, run_as: str | None = None) -> None:
        """Refuse, before a job is accepted, what could inject shell or Slurm syntax, and
        (as root) a job without a Unix account, or whose account cannot reach its spool
        folder (asked as the account: every folder on the way counts)."""
        check_command(command, cwd)
        account = self._account("", run_as)
        if account is None:
            return
        folder = self.spool.folder(account)
        if not can_enter(account, str(folder)):
            raise NotAllowed(
                f"run_as: the job's account {account.name} (uid {account.uid}) cannot reach"
                f" its Slurm output folder {folder}: every folder above the data directory"
                f" {self.spool.data_dir} needs o+x (or move the data directory)"
            )

    def enqueue(
        self,
        job_id: str,
        command: Sequence[str],
        gpus: int,
        cwd: str | None = None,
        job_class: str = "training",
        cpus: float | None = None,
        memory_gb: float | None = None,
        run_as: str | None = None,
    ) -> None:
        """Submit the job held (once: a job Slurm already has is left alone), asking
        Slurm for the CPUs and memory the core books on each of its nodes; as root, as
        the account ``run_as`` names (see the module's docstring)."""
        if self._current(job_id) is not None:
            return
        check_name(job_id, "job id")
        check_name(job_class, "class")
        check_command(command, cwd)
        account = self._account(job_id, run_as)
        folder = self.root / job_id
        folder.mkdir(parents=True, exist_ok=True)
        if account is not None:
            files = self.spool.files(account, job_id)
            self.spool.record(folder, files)
        else:
            (folder / Spool.RECORD).unlink(missing_ok=True)
            files = in_folder(folder)
        self._files[job_id] = files
        args = [
            "sbatch",
            "--parsable",
            "--hold",
            "--requeue",
            f"--job-name={self.prefix}{job_id}",
            f"--comment={self.opt_in_tag}:{job_id}:gpus={gpus}:class={job_class}:run=0",
            f"--output={files.stdout}",
            f"--error={files.stderr}",
            f"--export=ALL,ILUCID_JOB_ID={job_id}",
        ]
        if account is not None:
            # without --gid, Slurm 22.05 runs the job in root's group
            args += [f"--uid={account.uid}", f"--gid={account.gid}"]
            if cwd is None:  # its home, or / (never the service's own directory)
                cwd = account.home if os.path.isdir(account.home) else "/"
        if cwd is not None:
            args.append(f"--chdir={cwd}")
        if self.partition:
            args.append(f"--partition={self.partition}")
        if gpus > 0:
            args.append(f"--gres=gpu:{gpus}")  # what Slurm's queue shows while it is held
        args += host_resources(cpus, memory_gb)
        args += [str(self.script), str(files.exit), *command]
        # the job's environment is sbatch's (--export=ALL): as another account, the
        # service's own without anything that looks like a secret
        env = job_environment(self.env, None, account) if account is not None else None
        slurm_id = int(self._run(*args, env=env).strip().split(";")[0])
        if account is not None:  # an administrator's hold: the account cannot release it
            self._run("scontrol", "hold", str(slurm_id))
        self._jobs.setdefault(job_id, []).append(_queued(slurm_id, self.prefix + job_id))

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
        """Write the core's placement into the held job and release it. Its CPUs and
        memory were asked at ``sbatch`` (``enqueue``); a job lost with its node is
        submitted afresh with them. Slurm keeps ``--cpus-per-task`` per node when the
        placement spreads the job over several nodes (one task a node)."""
        job = self._current(job_id)
        if job is None or job.state == "NODE_FAIL":  # lost with its node: submit afresh
            if job is not None:
                self._jobs[job_id] = []
            self.enqueue(job_id, command, gpus, cwd, cpus=cpus, memory_gb=memory_gb, run_as=run_as)
            job = self._current(job_id)
            assert job is not None
        if job.state in _ACTIVE or job.state in _ENDED:
            return tuple(g for _, indices in job.gres for g in indices)
        if not job.reason.startswith("JobHeld"):
            return None  # released already: Slurm is starting it
        requeued = self._requeued_at.get(job_id)
        if requeued is not None and self.clock() - requeued < self.requeue_delay_s:
            return None  # too soon after the requeue: Slurm would fail the job
        slurm_id = str(job.job_id)
        self._files_of(job_id).exit.unlink(missing_ok=True)
        update = ["scontrol", "update", f"JobId={slurm_id}"]
        self._run(*update, "TresPerNode=")  # a typed GRES replaces only a cleared one
        settings = self._placement_settings(gpus, placement)
        if job.restarts > 0 or requeued is not None:
            settings.append("StartTime=now")  # skip the requeue's BeginTime wait
        if job.restarts > 0 and released_run(job.comment) is not None:
            # a later restart count than this one means Slurm requeued it (see observe)
            settings.append(f"Comment={with_run(job.comment, job.restarts)}")
        self._run(*update, *settings)
        self._run("scontrol", "release", slurm_id)
        self._requeued_at.pop(job_id, None)
        self._jobs[job_id] = [_queued(job.job_id, job.name, reason="None")]
        return None  # the GPUs are known once Slurm runs it (next pass)

    def _placement_settings(
        self, gpus: int, placement: Sequence[tuple[str, int]] | None
    ) -> list[str]:
        if not placement:
            return [f"TresPerNode=gres:gpu:{gpus}"] if gpus else []
        nodes = [self.where.get(name) for name, _ in placement]
        if any(n is None for n in nodes):
            raise ValueError(f"placement {list(placement)} names nodes Slurm does not have")
        counts = {count for _, count in placement}
        types = {n[1] for n in nodes if n is not None}
        physical = sorted({n[0] for n in nodes if n is not None})
        if len(types) > 1 and all(self._typed.count(p) == 1 for p in physical):
            types = {None}  # a gang over nodes of one GPU type each: untyped is exact there
        if len(counts) != 1 or len(types) != 1 or len(physical) != len(placement):
            # Slurm asks the same GPUs of every node: give Slurm the total, no node hint
            return [f"TresPerNode=gres:gpu:{gpus}"] if gpus else []
        per_node, gpu_type = counts.pop(), types.pop()
        gres = f"gres:gpu:{gpu_type}:{per_node}" if gpu_type else f"gres:gpu:{per_node}"
        settings = [f"NumNodes={len(physical)}", f"NodeList={','.join(physical)}"]
        if gpus:
            settings.insert(0, f"TresPerNode={gres}")
        return settings

    def stop(self, job_id: str) -> None:
        """Preempt: Slurm signals the job and queues it again, held for ilucid."""
        job = self._current(job_id)
        if job is None or job.state in _ENDED:
            return
        if job.state == "PENDING" and job.reason.startswith("JobHeld"):
            return
        if job.state == "PENDING":  # released but not started yet: hold it again
            self._run("scontrol", "hold", str(job.job_id))
            return
        self._stopping.add(job_id)
        self._requeue_held(job.job_id)
        self._requeued_at[job_id] = self.clock()

    def cancel(self, job_id: str) -> None:
        """Cancel every Slurm job standing for ``job_id`` (held, pending or running)."""
        ids = [str(j.job_id) for j in self._jobs.get(job_id, []) if j.state not in _ENDED]
        if ids:
            self._stopping.add(job_id)
            self._run("scancel", *ids)

    def claim(self, foreign: ForeignJob, job_id: str) -> None:
        """Take over an opted-in job: hold it and name it as ilucid's own."""
        check_name(job_id, "job id")
        slurm_id = foreign.key
        self._run("scontrol", "hold", slurm_id)
        self._run(
            "scontrol",
            "update",
            f"JobId={slurm_id}",
            f"Name={self.prefix}{job_id}",
            f"Comment={self.opt_in_tag}:{job_id}:gpus={foreign.gpus}"
            f":class={foreign.job_class}:run=0",
        )
        self._foreign = [f for f in self._foreign if f.key != foreign.key]
        self._jobs[job_id] = [_queued(int(foreign.key), self.prefix + job_id)]

    def release_all_held(self) -> list[int]:
        """Fail-open: give every held ilucid job back to Slurm's own scheduler."""
        self._refresh()
        released = []
        for jobs in self._jobs.values():
            for job in jobs:
                if job.state == "PENDING" and job.reason.startswith("JobHeld"):
                    self._run("scontrol", "release", str(job.job_id))
                    released.append(job.job_id)
        return released

    def logs(self, job_id: str, stream: str = "stdout", tail_bytes: int = 65536) -> str:
        if stream not in ("stdout", "stderr"):
            raise ValueError("stream must be stdout or stderr")
        files = self._files_of(check_name(job_id, "job id"))
        data = read_owned(files.stream(stream), files.owner, tail_bytes)
        return (data or b"").decode("utf-8", "replace")

    def forget(self, job_id: str) -> None:
        """The service recorded how the job ended: its exit file may go."""
        self._files_of(job_id).exit.unlink(missing_ok=True)
        self._stopping.discard(job_id)
        self._ran_on.pop(job_id, None)


def _report(files: JobFiles) -> Progress | None:
    """The job's last progress report, from the end of its output file."""
    tail = read_tail(files.stdout, files.owner, OUTPUT_TAIL_BYTES)
    return last_in_output(tail.data, cut=tail.cut) if tail is not None else None


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"#{uid}"


def _queued(slurm_id: int, name: str, reason: str = "JobHeldUser") -> SlurmJob:
    """What ilucid knows of a job it just submitted, claimed or released, until the next
    ``squeue`` says more."""
    return SlurmJob(slurm_id, name, "PENDING", reason, "", "", (), "", "", "", 0, 0)

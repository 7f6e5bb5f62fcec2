"""Reading Slurm's JSON output (``sinfo --json``, ``squeue --json``; Slurm 22.05, OpenAPI
v0.0.38) and validating what ilucid passes to Slurm's commands.

Pure functions: the backend runs the commands, these turn their output into
ilucid's vocabulary. A node with GPUs of several types becomes one logical
node per type (``node1/a100``, ``node1/v100``) because the core's node holds
identical GPUs; a job's placement on ``node1/v100`` becomes
``--nodelist=node1`` with ``gres:gpu:v100:N``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ilucid.backends.base import ForeignJob
from ilucid.backends.slurm_power import is_cloud, pool_of, powering
from ilucid.core import Cluster, Node

__all__ = [
    "SlurmJob",
    "SlurmNode",
    "check_command",
    "check_name",
    "expand_hostlist",
    "foreign_job",
    "gpu_indices",
    "host_resources",
    "logical_cluster",
    "opt_in_class",
    "parse_gres",
    "parse_jobs",
    "parse_nodes",
    "released_run",
    "tres_gpus",
    "unavailable_reason",
    "wait_status",
    "with_run",
]

# gpu, gpu:4, gpu:a100:4, gpu:a100:4(S:0), gpu:a100:2(IDX:0-1), gpu:v100:0(IDX:N/A)
_GRES = re.compile(r"^gpu(?::(?P<type>[^:(]+))?(?::(?P<count>\d+))?(?:\((?P<extra>[^)]*)\))?$")
#: a Slurm name ilucid passes on (partition, GPU type, node, user): no spaces, no options
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}$")
#: node state words (the base state or a flag) in which a node takes no new work, and how
#: ilucid says so; the first that applies names the node's state
_UNAVAILABLE = (
    ("down", "down"),
    ("fail", "failing"),
    ("failing", "failing"),
    ("maint", "in maintenance"),
    ("maintenance", "in maintenance"),
    ("future", "not in service yet"),
    ("not_responding", "not responding"),
    ("reboot_requested", "rebooting"),
    ("reboot_issued", "rebooting"),
    ("unknown", "not registered"),
)
#: base states of a node whose jobs still run (a drained node with jobs is "draining")
_BUSY = frozenset({"mixed", "allocated", "completing"})
#: ilucid's own marker in a job's comment: the restart count at its last release
_RUN = re.compile(r":run=(\d+)$")


def check_name(value: str, field: str) -> str:
    """A name that cannot smuggle shell or Slurm syntax into a command line."""
    if not _NAME.match(value):
        raise ValueError(
            f"{field} {value!r}: only letters, digits and _ . + - are allowed"
            " (it must not start with - or hold spaces, ';', ',' or newlines)"
        )
    return value


def check_command(command: Sequence[str], cwd: str | None) -> None:
    """Refuse what could be read as Slurm options or break the batch script.

    The command reaches Slurm as arguments of ilucid's batch script, never
    through a shell or ``--wrap``; still, an argument with a newline or NUL,
    or a program name starting with ``-`` (which sbatch would take for an
    option), is refused with the field named.
    """
    if not command or not command[0]:
        raise ValueError("command: name the program to run")
    if command[0].startswith("-"):
        raise ValueError(
            f"command: the program {command[0]!r} starts with '-', which sbatch would read"
            " as an option (--wrap and friends are not accepted)"
        )
    if any(c in command[0] for c in ";|&$`<>(){}"):
        raise ValueError(
            f"command: the program {command[0]!r} holds shell syntax; commands are never run"
            " through a shell here (to use one, say so: sh -c '...')"
        )
    for index, argument in enumerate(command):
        if "\n" in argument or "\r" in argument or "\x00" in argument:
            raise ValueError(f"command[{index}]: newlines and NUL are not allowed")
    if cwd is not None and (
        not cwd.startswith("/") or any(c in cwd for c in "\n\r\x00") or "%" in cwd
    ):
        raise ValueError(f"cwd {cwd!r}: give an absolute path without newlines or '%'")


@dataclass(frozen=True, slots=True)
class GresItem:
    gpu_type: str | None
    count: int
    indices: tuple[int, ...]


def parse_gres(text: str) -> list[GresItem]:
    """``gpu:a100:4(S:0),gpu:v100:2(IDX:4-5)`` -> items; other GRES are ignored."""
    items: list[GresItem] = []
    for part in _split_top(text or ""):
        match = _GRES.match(part.strip())
        if match is None:
            continue
        extra = match["extra"] or ""
        indices: tuple[int, ...] = ()
        if extra.startswith("IDX:") and extra != "IDX:N/A":
            indices = _expand(extra.removeprefix("IDX:"))
        gpu_type, count_text = match["type"], match["count"]
        if gpu_type is not None and gpu_type.isdigit() and count_text is None:
            gpu_type, count_text = None, gpu_type  # "gpu:2": a count, not a type
        count = int(count_text) if count_text else (len(indices) or 1)
        items.append(GresItem(gpu_type, count, indices))
    return items


def _split_top(text: str, brackets: str = "()") -> list[str]:
    """Split on commas outside brackets (``IDX:0,2-3`` and ``node[1,3]`` hold commas)."""
    opening, closing = brackets[0], brackets[1]
    parts, depth, current = [], 0, ""
    for char in text:
        if char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current:
        parts.append(current)
    return parts


def _expand(ranges: str) -> tuple[int, ...]:
    out: list[int] = []
    for piece in ranges.split(","):
        first, _, last = piece.partition("-")
        if first.isdigit():
            out.extend(range(int(first), int(last or first) + 1))
    return tuple(out)


def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's compressed host list: ``node[1-3,5],gpu07`` -> node1, node2, node3, node5,
    gpu07 (zero padding kept: ``n[08-10]`` -> n08, n09, n10)."""
    names: list[str] = []
    for part in _split_top(hostlist, "[]"):
        match = re.match(r"^(?P<head>[^\[]*)\[(?P<ranges>[^\]]+)\](?P<tail>.*)$", part)
        if match is None:
            if part:
                names.append(part)
            continue
        for piece in match["ranges"].split(","):
            first, _, last = piece.partition("-")
            width = len(first)
            for number in range(int(first), int(last or first) + 1):
                names.append(f"{match['head']}{number:0{width}d}{match['tail']}")
    return names


def gpu_indices(gres_detail: Sequence[str]) -> tuple[tuple[str | None, tuple[int, ...]], ...]:
    """Per node of a running job: (GPU type, indices) from ``gres_detail``."""
    out = []
    for entry in gres_detail:
        for item in parse_gres(entry):
            out.append((item.gpu_type, item.indices))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    gpus: Mapping[str, int]  # GPU type (or "gpu" when untyped) -> count
    state: str
    partitions: tuple[str, ...]
    reason: str
    #: what Slurm says the node has (``cpus``, ``real_memory`` in MiB); 0 when it does not
    cpus: int = 0
    memory_mib: int = 0
    #: Slurm's state flags as it writes them (``CLOUD``, ``POWERED_DOWN``, ``DRAIN``, ...)
    flags: tuple[str, ...] = ()
    #: the node's configured features (``Feature=pool_cloud,...``)
    features: tuple[str, ...] = ()

    @property
    def cloud(self) -> bool:
        """Configured ``State=CLOUD``: powered up and down on demand (slurm_power)."""
        return is_cloud(self.flags)

    @property
    def usable(self) -> bool:
        return unavailable_reason(self) is None


def unavailable_reason(node: SlurmNode) -> str | None:
    """Why Slurm gives a node no new work, in Slurm's words: ``drained: disk swap``,
    ``draining: disk swap`` (jobs still run there), ``down: Not responding``; None when
    it takes work."""
    words = [w.rstrip("*~#!%$@^-") for w in node.state.lower().replace("+", " ").split()]
    if powering(node.flags):  # off or starting: it answers once its slurmd registers
        words = [w for w in words if w != "not_responding"]
    state = next((said for word, said in _UNAVAILABLE if word in words), None)
    if state is None and any(w in ("drain", "drained", "draining") for w in words):
        state = "draining" if words and words[0] in _BUSY else "drained"
    if state is None:
        return None
    return f"{state}: {node.reason}" if node.reason else state


def _amount(raw: Mapping[str, Any], field: str, what: str) -> int:
    """A whole, non-negative number Slurm reports (0 when the field is absent or null)."""
    value = raw.get(field)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"sinfo --json: {what}: {field} {value!r} is not a whole number >= 0")
    return value


def parse_nodes(document: Mapping[str, Any]) -> list[SlurmNode]:
    """Nodes as ``sinfo --json`` (22.05) gives them: GPUs from ``gres``, CPUs from
    ``cpus`` and memory (MiB) from ``real_memory`` (the node's configured RealMemory)."""
    nodes = []
    for raw in document.get("nodes", []):
        counts: dict[str, int] = {}
        for item in parse_gres(str(raw.get("gres", ""))):
            key = item.gpu_type or "gpu"
            counts[key] = counts.get(key, 0) + item.count
        flags = tuple(str(f) for f in raw.get("state_flags", []) or [])
        state = " ".join([str(raw.get("state", "unknown")), *(f.lower() for f in flags)])
        features = tuple(f for f in str(raw.get("features", "") or "").split(",") if f)
        nodes.append(
            SlurmNode(
                name=str(raw["name"]),
                gpus=counts,
                state=state,
                partitions=tuple(raw.get("partitions", [])),
                reason=str(raw.get("reason", "")),
                cpus=_amount(raw, "cpus", f"node {raw['name']}"),
                memory_mib=_amount(raw, "real_memory", f"node {raw['name']}"),
                flags=flags,
                features=features,
            )
        )
    return nodes


def logical_cluster(
    nodes: Sequence[SlurmNode], partition: str | None = None
) -> tuple[Cluster, dict[str, tuple[str, str | None]]]:
    """The core's cluster: one node per (Slurm node, GPU type); and each logical node's
    Slurm node name and GPU type (None when the GPUs are untyped).

    Each logical node offers the whole Slurm node's CPUs and memory (GB of 2**30 bytes,
    as the local backend counts them): the two halves of a node with two GPU types book
    against the same CPUs and memory, as the local backend's profiler split does; a split
    by GPUs would refuse a job half the node's CPUs. Slurm itself still holds a job whose
    CPUs or memory the other half has taken (it waits for Resources).

    A cloud node (``State=CLOUD``) is labelled ``pool=<name>`` from its ``pool_<name>``
    feature (default ``cloud``), whatever its power state."""
    core_nodes: list[Node] = []
    where: dict[str, tuple[str, str | None]] = {}
    for node in sorted(nodes, key=lambda n: n.name):
        if partition is not None and partition not in node.partitions:
            continue
        types = sorted(node.gpus)
        for gpu_type in types:
            name = node.name if len(types) == 1 else f"{node.name}/{gpu_type}"
            typed = None if gpu_type == "gpu" else gpu_type
            labels = {"slurm_node": node.name}
            if node.cloud:
                labels["pool"] = pool_of(node.features)
            core_nodes.append(
                Node(
                    name,
                    node.gpus[gpu_type],
                    typed or "generic",
                    0.0,
                    labels,
                    cpus=float(node.cpus),
                    memory_gb=node.memory_mib / 1024,
                )
            )
            where[name] = (node.name, typed)
    return Cluster(tuple(core_nodes)), where


@dataclass(frozen=True, slots=True)
class SlurmJob:
    job_id: int
    name: str
    state: str
    reason: str
    description: str
    nodes: str
    gres: tuple[tuple[str | None, tuple[int, ...]], ...]
    tres_per_node: str
    comment: str
    user: str
    exit_code: int
    restarts: int
    node_count: int = 1
    #: what the job asked of each node: ``--mem`` (MiB) and its CPUs (0: not stated)
    memory_per_node_mib: int = 0
    min_cpus_per_node: int = 0
    #: the uid it runs as (-1: not in squeue's answer)
    user_id: int = -1


def parse_jobs(document: Mapping[str, Any]) -> list[SlurmJob]:
    jobs = []
    for raw in document.get("jobs", []):
        cpus = int(raw.get("minimum_cpus_per_node", 0) or 0)
        # --mem is memory_per_node; --mem-per-cpu is memory_per_cpu (MiB) x its CPUs a node
        memory = int(raw.get("memory_per_node", 0) or 0)
        memory = memory or int(raw.get("memory_per_cpu", 0) or 0) * max(cpus, 1)
        jobs.append(
            SlurmJob(
                job_id=int(raw["job_id"]),
                name=str(raw.get("name", "")),
                state=str(raw.get("job_state", "")),
                reason=str(raw.get("state_reason", "")),
                description=str(raw.get("state_description", "")),
                nodes=str(raw.get("nodes", "")),
                gres=gpu_indices(raw.get("gres_detail", []) or []),
                tres_per_node=str(raw.get("tres_per_node", "")),
                comment=str(raw.get("comment", "")),
                user=str(raw.get("user_name", "")),
                exit_code=int(raw.get("exit_code", 0) or 0),
                restarts=int(raw.get("restart_cnt", 0) or 0),
                node_count=int(raw.get("node_count", 1) or 1),
                memory_per_node_mib=memory,
                min_cpus_per_node=cpus,
                user_id=int(raw["user_id"]) if raw.get("user_id") is not None else -1,
            )
        )
    return jobs


def tres_gpus(tres_per_node: str) -> tuple[str | None, int]:
    """``gres:gpu:a100:2`` -> (a100, 2), ``gres/gpu:2`` -> (None, 2): the GPU type and
    the GPUs per node a job asks for ((None, 0) when it asks for none)."""
    for part in tres_per_node.split(","):
        pieces = part.replace("/", ":").split(":")
        if len(pieces) >= 2 and pieces[0] == "gres" and pieces[1] == "gpu":
            rest = pieces[2:]
            count = int(rest.pop()) if rest and rest[-1].isdigit() else 1
            return (rest[0] if rest else None), count
    return None, 0


def opt_in_class(comment: str) -> str:
    """``--comment=ilucid:inference`` opts a job in as inference; plain ``ilucid`` trains."""
    pieces = comment.split(":")
    wanted = pieces[1] if len(pieces) > 1 else "training"
    return wanted if wanted in ("training", "inference", "best-effort") else "training"


def released_run(comment: str) -> int | None:
    """The restart count ilucid recorded in a job's comment when it last released it
    (``...:run=2``); None for a job without the marker."""
    match = _RUN.search(comment)
    return int(match[1]) if match else None


def with_run(comment: str, run: int) -> str:
    """The comment with ilucid's release marker set to ``run``."""
    return _RUN.sub("", comment) + f":run={run}"


def wait_status(status: int) -> int:
    """Slurm's ``exit_code`` is a wait status: 256 is exit 1, 15 is SIGTERM (-15)."""
    if status & 0x7F:
        return -(status & 0x7F)
    return (status >> 8) & 0xFF


def foreign_job(job: SlurmJob) -> ForeignJob:
    """An opted-in job as it asked Slurm: ``--gres=gpu:a100:2 --nodes=2`` is 2 x 2 a100."""
    gpu_type, per_node = tres_gpus(job.tres_per_node)
    nodes = max(1, job.node_count)
    return ForeignJob(
        str(job.job_id),
        job.user,
        per_node * nodes,
        opt_in_class(job.comment),
        job.name,
        gpu_type=gpu_type,
        nodes=nodes,
        gpus_per_node=per_node,
        # one CPU a node is Slurm's own default: booked only when the job asked for more
        cpus=float(job.min_cpus_per_node) if job.min_cpus_per_node > 1 else None,
        memory_gb=job.memory_per_node_mib / 1024 if job.memory_per_node_mib else None,
    )


def host_resources(cpus: float | None, memory_gb: float | None) -> list[str]:
    """sbatch's options for the CPUs and memory a job needs on each node: whole CPUs
    (``--cpus-per-task``, rounded up: Slurm allocates no fractions) and ``--mem`` in
    MiB (ilucid's GB is 2**30 bytes), rounded up."""
    args = []
    if cpus is not None:
        args.append(f"--cpus-per-task={math.ceil(cpus)}")
    if memory_gb is not None:
        args.append(f"--mem={math.ceil(memory_gb * 1024)}M")
    return args

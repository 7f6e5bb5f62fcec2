"""Parsers for the public trace formats ilucid replays.

Each parser returns jobs sorted by submit time (a file whose times go
backwards is rejected, since a replay of it would be silently wrong) and
counts what it skipped and why. Times are seconds from the trace's origin.
With ``limit`` a parser stops reading once it holds that many jobs: the first
jobs of a file, as :meth:`Trace.limit` keeps, without reading the rest.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ilucid.core import Cluster, JobClass, JobSpec, Node
from ilucid.core.fractional import PodRequest, ShareNode
from ilucid.traces.reader import MAX_NUMBER, MAX_SECONDS, Row, TraceError, read_rows

__all__ = [
    "GENERIC_COLUMNS",
    "Trace",
    "load_alibaba",
    "load_alibaba_nodes",
    "load_alibaba_share",
    "load_generic",
    "load_helios",
    "load_itp",
    "load_philly",
]


@dataclass(slots=True)
class Trace:
    """Jobs of a trace and, when the trace has one, its cluster."""

    name: str
    jobs: list[JobSpec]
    source: str
    cluster: Cluster | None = None
    synthetic: bool = False
    skipped: Counter[str] = field(default_factory=Counter)

    def limit(self, count: int | None) -> Trace:
        if count is None or count >= len(self.jobs):
            return self
        return Trace(
            self.name, self.jobs[:count], self.source, self.cluster, self.synthetic, self.skipped
        )


class _RowChecks:
    """Checks every trace shares: submit times never go backwards, ids are unique."""

    def __init__(self, time_field: str, id_field: str) -> None:
        self.time_field = time_field
        self.id_field = id_field
        self.last = float("-inf")
        self.seen: dict[str, int] = {}

    def check(self, row: Row, value: float) -> None:
        if value < self.last:
            raise row.error(
                self.time_field,
                f"submit times must not go backwards ({value:g} after {self.last:g})",
            )
        self.last = value
        job_id = row.text(self.id_field)
        first = self.seen.setdefault(job_id, row.line)
        if first != row.line:
            raise row.error(self.id_field, f"job id {job_id!r} already used on line {first}")


def _full(jobs: list[JobSpec], limit: int | None) -> bool:
    """Whether the parser holds the ``limit`` jobs asked for (and stops reading)."""
    return limit is not None and len(jobs) >= limit


def _trace(path: Path, jobs: list[JobSpec], skipped: Counter[str]) -> Trace:
    """The trace of ``path``; one without jobs is refused here, so that no caller
    reports it later as a cluster problem (e.g. "no job fits")."""
    if not jobs:
        if skipped:
            why = ", ".join(f"{n:,} {reason}" for reason, n in sorted(skipped.items()))
            raise TraceError(path, None, None, f"no jobs: every row was skipped ({why})")
        raise TraceError(path, None, None, "no jobs: the file has a header and no rows")
    return Trace(path.stem, jobs, str(path), skipped=skipped)


def _shape(row: Row, text: str, size: int) -> tuple[int, ...]:
    try:
        parts = tuple(map(int, text.split("+")))
    except ValueError:
        raise row.error("shape", f"expected GPUs per machine such as '8+8', got {text!r}") from None
    if min(parts) <= 0 or sum(parts) != size:
        raise row.error("shape", f"{text!r} does not split {size} GPUs into positive parts")
    return parts


def load_philly(path: Path, limit: int | None = None) -> Trace:
    """Philly (ATC'19) as converted by RFold: one row per job."""
    jobs: list[JobSpec] = []
    skipped: Counter[str] = Counter()
    order = _RowChecks("arrival time (sec)", "job id")
    required = ("job id", "arrival time (sec)", "shape", "size", "duration (sec)")
    for row in read_rows(path, required):
        submit = row.seconds("arrival time (sec)")
        order.check(row, submit)
        size = row.gpus("size")
        duration = row.seconds("duration (sec)")
        if size == 0:
            skipped["uses no GPU"] += 1
            continue
        # checked, not kept: the shape is how Philly's scheduler happened to spread the
        # job ("2+1+1"), not a request; a replay's placer decides it (a JobSpec shape
        # binds the placer, as a live gang's nodes x gpus_per_node does)
        _shape(row, row.text("shape"), size)
        jobs.append(JobSpec(row.text("job id"), submit, size, duration))
        if _full(jobs, limit):
            break
    return _trace(path, jobs, skipped)


def load_itp(path: Path, limit: int | None = None) -> Trace:
    """Microsoft ITP clusters (elasticflow-traces raw format)."""
    jobs: list[JobSpec] = []
    skipped: Counter[str] = Counter()
    order = _RowChecks("submission_time", "job_id")
    for row in read_rows(path, ("job_id", "submission_time", "duration", "num_gpu")):
        submit = row.seconds("submission_time")
        order.check(row, submit)
        gpus = row.gpus("num_gpu")
        duration = row.seconds("duration")
        if gpus == 0:
            skipped["uses no GPU"] += 1
            continue
        jobs.append(JobSpec(row.text("job_id"), submit, gpus, duration))
        if _full(jobs, limit):
            break
    return _trace(path, jobs, skipped)


def load_alibaba_nodes(path: Path) -> Cluster:
    """Alibaba v2023 node list (``sn, cpu_milli, memory_mib, gpu, model``).

    Nodes without GPUs are dropped: they cannot host any job ilucid schedules.
    """
    nodes: list[Node] = []
    for row in read_rows(path, ("sn", "gpu", "model")):
        gpus = row.gpus("gpu")
        if gpus > 0:
            nodes.append(Node(row.text("sn"), gpus, row.text("model", "unknown")))
    if not nodes:
        raise TraceError(path, None, "gpu", "no node has a GPU")
    return Cluster(tuple(nodes))


def load_alibaba(pods: Path, nodes: Path | None = None, limit: int | None = None) -> Trace:
    """Alibaba GPU v2023 pods: LS pods are inference, others training.

    Duration is ``deletion_time - scheduled_time``; pods that never started
    and pods without GPUs are skipped. A fractional ``gpu_milli`` request is
    kept on the job (whole-GPU policies round it up to one GPU).
    """
    jobs: list[JobSpec] = []
    skipped: Counter[str] = Counter()
    order = _RowChecks("creation_time", "name")
    required = (
        "name",
        "num_gpu",
        "gpu_milli",
        "gpu_spec",
        "qos",
        "creation_time",
        "deletion_time",
        "scheduled_time",
    )
    for row in read_rows(pods, required):
        submit = row.seconds("creation_time")
        order.check(row, submit)
        gpus = row.gpus("num_gpu")
        if gpus == 0:
            skipped["uses no GPU"] += 1
            continue
        scheduled = row.optional_seconds("scheduled_time")
        deleted = row.optional_seconds("deletion_time")
        if scheduled is None or deleted is None:
            skipped["never started"] += 1
            continue
        if deleted < scheduled:
            raise row.error("deletion_time", f"{deleted:g} is before scheduled_time {scheduled:g}")
        milli = row.gpu_milli("gpu_milli") if gpus == 1 else 1000
        qos = row.text("qos", "BE")
        spec = row.values.get("gpu_spec", "").strip() or None
        jobs.append(
            JobSpec(
                row.text("name"),
                submit,
                gpus,
                deleted - scheduled,
                job_class=JobClass.INFERENCE if qos == "LS" else JobClass.TRAINING,
                tenant=qos,
                gpu_type=spec,
                gpu_milli=milli,
            )
        )
        if _full(jobs, limit):
            break
    trace = _trace(pods, jobs, skipped)
    trace.cluster = load_alibaba_nodes(nodes) if nodes is not None else None
    return trace


def _seconds(row: Row, name: str) -> float:
    """Seconds (finite, any sign: an epoch time may precede 1970) or an ISO date-time."""
    raw = row.text(name)
    try:
        value = float(raw)
    except ValueError:
        pass
    else:
        return row.bounded(name, value, None, MAX_NUMBER, raw=raw)
    try:
        return datetime.fromisoformat(raw).timestamp()
    except ValueError:
        raise row.error(name, f"expected seconds or an ISO date-time, got {raw!r}") from None


def load_helios(path: Path, limit: int | None = None) -> Trace:
    """Helios / Lucid artifact format.

    Columns ``job_id,user,vc,gpu_num,cpu_num,state,submit_time,duration``.

    ``submit_time`` may be seconds or a date-time; times are shifted so the
    first job arrives at 0. Jobs without GPUs are skipped, as the artifact does.
    """
    jobs: list[JobSpec] = []
    skipped: Counter[str] = Counter()
    order = _RowChecks("submit_time", "job_id")
    origin: float | None = None
    for row in read_rows(path, ("job_id", "user", "vc", "gpu_num", "submit_time", "duration")):
        absolute = _seconds(row, "submit_time")
        order.check(row, absolute)
        origin = absolute if origin is None else origin
        if absolute - origin > MAX_SECONDS:
            raise row.error(
                "submit_time",
                f"{absolute - origin:g} s after the first job is beyond the limit of"
                f" {MAX_SECONDS:g} s (about 100 years)",
            )
        gpus = row.gpus("gpu_num")
        duration = row.seconds("duration")
        if gpus == 0:
            skipped["uses no GPU"] += 1
            continue
        jobs.append(
            JobSpec(
                row.text("job_id"),
                absolute - origin,
                gpus,
                duration,
                tenant=row.text("vc"),
                user=row.text("user"),
            )
        )
        if _full(jobs, limit):
            break
    return _trace(path, jobs, skipped)


#: Columns of the documented generic format; the first four are required.
GENERIC_COLUMNS = (
    "id",
    "submit_time",
    "num_gpus",
    "duration",
    "job_class",
    "tenant",
    "user",
    "gpu_type",
    "gpu_memory_gb",
    "gpu_milli",
    "priority",
)


def load_generic(path: Path, limit: int | None = None) -> Trace:
    """ilucid's generic CSV (see docs/traces.md): one job per row, seconds; text that
    ilucid quoted against spreadsheet formulas (``/history.csv``) is read unquoted."""
    jobs: list[JobSpec] = []
    skipped: Counter[str] = Counter()
    order = _RowChecks("submit_time", "id")
    classes = {c.value: c for c in JobClass}
    for row in read_rows(path, GENERIC_COLUMNS[:4], quoted_formulas=True):
        submit = row.seconds("submit_time")
        order.check(row, submit)
        job_class_text = row.text("job_class", "training")
        if job_class_text not in classes:
            raise row.error(
                "job_class", f"expected one of {', '.join(classes)}, got {job_class_text!r}"
            )
        gpus = row.gpus("num_gpus")
        duration = row.seconds("duration")
        if gpus == 0:
            skipped["uses no GPU"] += 1
            continue
        milli = row.gpu_milli("gpu_milli") if row.values.get("gpu_milli", "").strip() else 1000
        if milli < 1000 and gpus != 1:
            raise row.error("gpu_milli", f"a share of one GPU needs num_gpus = 1, got {gpus}")
        priority = row.optional_number("priority", None)
        jobs.append(
            JobSpec(
                row.text("id"),
                submit,
                gpus,
                duration,
                job_class=classes[job_class_text],
                tenant=row.text("tenant", "default"),
                user=row.text("user", "default"),
                gpu_type=row.values.get("gpu_type", "").strip() or None,
                gpu_memory_gb=row.optional_number("gpu_memory_gb"),
                gpu_milli=milli,
                priority=0 if priority is None else int(priority),
            )
        )
        if _full(jobs, limit):
            break
    return _trace(path, jobs, skipped)


def load_alibaba_share(pods: Path, nodes: Path) -> tuple[list[PodRequest], list[ShareNode]]:
    """Alibaba v2023 pods and GPU nodes with CPU, memory and fractional GPU requests.

    For the fragmentation study (docs/fragmentation.md): every pod that asks
    for a GPU, in file order, whether or not it ever ran (the study packs
    requests, it does not replay time; the re-weighted variants are not in
    time order); ``gpu_spec`` (e.g. ``V100M16|V100M32``)
    becomes the set of GPU models the pod accepts.
    """
    node_list: list[ShareNode] = []
    for row in read_rows(nodes, ("sn", "cpu_milli", "memory_mib", "gpu", "model")):
        gpus = row.gpus("gpu")
        if gpus > 0:
            node_list.append(
                ShareNode(
                    row.text("sn"),
                    row.integer("cpu_milli"),
                    row.integer("memory_mib"),
                    gpus,
                    row.text("model"),
                )
            )
    if not node_list:
        raise TraceError(nodes, None, "gpu", "no node has a GPU")
    requests: list[PodRequest] = []
    seen: set[str] = set()
    required = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec")
    for row in read_rows(pods, required):
        name = row.text("name")
        if name in seen:
            raise row.error("name", f"duplicate pod {name!r}")
        seen.add(name)
        gpus = row.gpus("num_gpu")
        if gpus == 0:
            continue
        milli = row.gpu_milli("gpu_milli") if gpus == 1 else 1000
        spec = row.values.get("gpu_spec", "").strip()
        requests.append(
            PodRequest(
                name,
                row.integer("cpu_milli"),
                row.integer("memory_mib"),
                gpus,
                milli,
                frozenset(spec.split("|")) if spec else None,
            )
        )
    return requests, node_list

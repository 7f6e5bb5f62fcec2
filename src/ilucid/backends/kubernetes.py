"""The Kubernetes backend: ilucid admits suspended Jobs; kube-scheduler still binds pods.

A site's users create batch/v1 Jobs labelled ``ilucid.io/queue`` with
``spec.suspend: true`` (by hand, by their tooling, or through a site's
mutating admission policy). ilucid accepts each as one of its jobs
(annotation ``ilucid.io/job-id``), and when the core starts it writes the
chosen nodes as required node affinity into the pod template (scheduling
directives may change while a Job is suspended) and un-suspends it.
Preemption re-suspends it: the Job controller deletes its pods (they get
SIGTERM and their grace period to checkpoint). Completion and failure are
read from the Job's conditions. ilucid never creates, deletes or binds pods.

Why a Job waits is visible from ``kubectl describe job``: an ``IlucidPending``
condition on the Job and an Event, written only when the sentence changes.

Only Jobs carrying the queue label are ever read or written; everything
else in the cluster is left alone.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ilucid.backends.base import (
    BackendUnavailable,
    ForeignJob,
    Observation,
    ObservedJob,
    ProcessState,
)
from ilucid.core import Cluster, Node

__all__ = ["KubernetesBackend", "LeaseElector", "node_inventory"]

QUEUE_LABEL = "ilucid.io/queue"
JOB_ID = "ilucid.io/job-id"
CLASS = "ilucid.io/class"
ESTIMATE = "ilucid.io/estimate-seconds"
PLACED_ON = "ilucid.io/placed-on"
GPU = "nvidia.com/gpu"
PRODUCT = "nvidia.com/gpu.product"
MEMORY = "nvidia.com/gpu.memory"  # MiB, as GPU feature discovery writes it
#: node labels read as topology (the core's placer uses ``rack`` and ``nvlink``)
TOPOLOGY = {
    "zone": "topology.kubernetes.io/zone",
    "rack": "ilucid.io/rack",
    "nvlink": "ilucid.io/nvlink-domain",
}
PENDING_CONDITION = "IlucidPending"


def _api_error(exc: Exception) -> BackendUnavailable:
    """The API's own status and reason when it answered, else what kind of failure."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(exc, ApiException):
        status, reason = exc.status, exc.reason or type(exc).__name__
        return BackendUnavailable(f"Kubernetes API: {status or ''} {reason}".strip())
    return BackendUnavailable(f"Kubernetes API: {type(exc).__name__}")


def node_inventory(nodes: Sequence[Any]) -> tuple[Cluster, dict[str, str]]:
    """The core's nodes from Kubernetes nodes with allocatable GPUs, and the nodes left
    out with the reason (cordoned, not ready)."""
    kept: list[Node] = []
    excluded: dict[str, str] = {}
    for node in sorted(nodes, key=lambda n: n.metadata.name):
        name = node.metadata.name
        allocatable = (node.status.allocatable or {}) if node.status else {}
        gpus = int(str(allocatable.get(GPU, "0")) or 0)
        if gpus <= 0:
            continue
        if node.spec is not None and node.spec.unschedulable:
            excluded[name] = "cordoned (spec.unschedulable)"
            continue
        conditions = (node.status.conditions or []) if node.status else []
        ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
        if not ready:
            excluded[name] = "not Ready"
            continue
        labels = dict(node.metadata.labels or {})
        memory = labels.get(MEMORY, "")
        topology = {key: labels[label] for key, label in TOPOLOGY.items() if label in labels}
        kept.append(
            Node(
                name,
                gpus,
                labels.get(PRODUCT, "generic"),
                int(memory) / 1024.0 if memory.isdigit() else 0.0,
                topology,
            )
        )
    return Cluster(tuple(kept)), excluded


class KubernetesBackend:
    name = "kubernetes"

    def __init__(
        self,
        api_client: Any,
        namespace: str | None = None,
        queue_label: str = QUEUE_LABEL,
    ) -> None:
        from kubernetes import client

        # typed Any: plain dict bodies (accepted by the client) instead of its models
        self.batch: Any = client.BatchV1Api(api_client)
        self.core: Any = client.CoreV1Api(api_client)
        self.namespace = namespace  # None: every namespace
        self.queue_label = queue_label
        self.cluster: Cluster | None = None
        self.excluded: dict[str, str] = {}
        self._jobs: dict[str, Any] = {}  # ilucid id -> Job object
        self._foreign: list[ForeignJob] = []
        self._published: dict[str, str] = {}
        self._cancelled: set[str] = set()

    # -- observing --------------------------------------------------------------------
    def _list_jobs(self) -> list[Any]:
        if self.namespace is None:
            result = self.batch.list_job_for_all_namespaces(label_selector=self.queue_label)
        else:
            result = self.batch.list_namespaced_job(self.namespace, label_selector=self.queue_label)
        return list(result.items)

    def observe(self) -> Observation:
        try:
            if self.cluster is None:
                self.cluster, self.excluded = node_inventory(self.core.list_node().items)
            jobs = self._list_jobs()
        except Exception as exc:  # the API server is away: this pass is retried
            raise _api_error(exc) from None
        ours: dict[str, Any] = {}
        foreign: list[ForeignJob] = []
        for job in jobs:
            annotations = job.metadata.annotations or {}
            job_id = annotations.get(JOB_ID)
            if job_id:
                ours[job_id] = job
            elif job.spec.suspend and not _finished(job):
                foreign.append(_foreign(job))
        self._jobs, self._foreign = ours, foreign
        observed = {job_id: self._as_observed(job_id, job) for job_id, job in ours.items()}
        return Observation(self.cluster, observed)

    def _as_observed(self, job_id: str, job: Any) -> ObservedJob:
        parts = _placed_on(job)
        finished = _finished(job)
        if finished is not None:
            code = 0 if finished == "Complete" else 1
            if job_id in self._cancelled:
                code = -15
            return ObservedJob(job_id, ProcessState.EXITED, (), code, parts)
        active = (job.status.active or 0) if job.status else 0
        if job.spec.suspend:
            if active:
                return ObservedJob(job_id, ProcessState.STOPPING, (), None, parts)
            if job_id in self._cancelled:
                return ObservedJob(job_id, ProcessState.EXITED, (), -15, parts)
            return ObservedJob(job_id, ProcessState.HELD, (), None, parts)
        return ObservedJob(job_id, ProcessState.RUNNING, (), None, parts)

    def foreign_jobs(self) -> list[ForeignJob]:
        """Suspended Jobs with the queue label that ilucid has not accepted yet."""
        return list(self._foreign)

    def reason(self, job_id: str) -> str | None:
        job = self._jobs.get(job_id)
        if job is None or not job.spec.suspend:
            return None
        return f"Kubernetes: Job {job.metadata.namespace}/{job.metadata.name} is suspended"

    # -- acting -----------------------------------------------------------------------------
    def check(self, command: Sequence[str], cwd: str | None) -> None:
        """Jobs come from Kubernetes itself; the API cannot make one."""
        raise ValueError(
            "on Kubernetes, submit a batch/v1 Job with spec.suspend: true and the label"
            f" {self.queue_label} (see deploy/kubernetes/examples); ilucid admits it"
        )

    def _patch(self, job: Any, body: Mapping[str, Any]) -> Any:
        try:
            return self.batch.patch_namespaced_job(
                job.metadata.name, job.metadata.namespace, dict(body)
            )
        except Exception as exc:
            raise _api_error(exc) from None

    def claim(self, foreign: ForeignJob, job_id: str) -> None:
        """Accept a labelled suspended Job as ilucid's job ``job_id`` (an annotation)."""
        namespace, _, name = foreign.key.partition("/")
        try:
            job = self.batch.read_namespaced_job(name, namespace)
        except Exception as exc:
            raise _api_error(exc) from None
        self._jobs[job_id] = self._patch(job, {"metadata": {"annotations": {JOB_ID: job_id}}})
        self._foreign = [f for f in self._foreign if f.key != foreign.key]

    def start(
        self,
        job_id: str,
        command: Sequence[str],
        gpus: int,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        placement: Sequence[tuple[str, int]] | None = None,
        run_as: str | None = None,
    ) -> tuple[int, ...] | None:
        job = self._jobs.get(job_id)
        if job is None:
            raise ValueError(f"job {job_id}: its Kubernetes Job is gone")
        if not job.spec.suspend or _finished(job) is not None:
            return ()  # admitted already: never twice
        active = (job.status.active or 0) if job.status else 0
        if active:
            return None  # its pods from before a preemption are still terminating
        nodes = sorted({name for name, _ in placement or []})
        affinity = (
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": nodes,
                                    }
                                ]
                            }
                        ]
                    }
                }
            }
            if nodes
            else None
        )
        # scheduling directives first, while the Job is still suspended; then admit it
        self._patch(
            job,
            {
                "metadata": {"annotations": {PLACED_ON: ",".join(nodes)}},
                "spec": {"template": {"spec": {"affinity": affinity}}},
            },
        )
        self._jobs[job_id] = self._patch(job, {"spec": {"suspend": False}})
        self._published.pop(job_id, None)
        return ()

    def stop(self, job_id: str) -> None:
        """Preempt: suspend the Job; its pods get SIGTERM and their grace period."""
        job = self._jobs.get(job_id)
        if job is None or job.spec.suspend or _finished(job) is not None:
            return
        self._jobs[job_id] = self._patch(job, {"spec": {"suspend": True}})

    def cancel(self, job_id: str) -> None:
        """ilucid never deletes a user's Job: cancelling suspends it for good."""
        self._cancelled.add(job_id)
        job = self._jobs.get(job_id)
        if job is not None and not job.spec.suspend and _finished(job) is None:
            self._jobs[job_id] = self._patch(job, {"spec": {"suspend": True}})

    def publish_reason(self, job_id: str, why: str) -> bool:
        """Show why a Job waits, in Kubernetes itself: a condition and an Event, written
        only when the sentence changed. Returns whether anything was written."""
        job = self._jobs.get(job_id)
        if job is None or self._published.get(job_id) == why:
            return False
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        condition = {
            "type": PENDING_CONDITION,
            "status": "True",
            "reason": "WaitingForIlucid",
            "message": why,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
        namespace, name = job.metadata.namespace, job.metadata.name
        event = {
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": name,
                "namespace": namespace,
                "uid": job.metadata.uid,
            },
            "reason": "IlucidPending",
            "message": why,
            "type": "Normal",
            "source": {"component": "ilucid"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.batch.patch_namespaced_job_status(
                name, namespace, {"status": {"conditions": [condition]}}
            )
            self.core.create_namespaced_event(namespace, event)
        except Exception as exc:
            raise _api_error(exc) from None
        self._published[job_id] = why
        return True

    def logs(self, job_id: str, stream: str = "stdout", tail_bytes: int = 65536) -> str:
        job = self._jobs.get(job_id)
        where = f"{job.metadata.namespace}/{job.metadata.name}" if job is not None else job_id
        return f"(logs of Kubernetes jobs: kubectl logs job/{where})\n"


def _finished(job: Any) -> str | None:
    for condition in (job.status.conditions or []) if job.status else []:
        if condition.type in ("Complete", "Failed") and condition.status == "True":
            return str(condition.type)
    return None


def _placed_on(job: Any) -> tuple[tuple[str, int], ...]:
    annotations = job.metadata.annotations or {}
    nodes = [n for n in annotations.get(PLACED_ON, "").split(",") if n]
    gpus = _gpus_of(job)
    if not nodes or job.spec.suspend:
        return ()
    per_node, extra = divmod(gpus, len(nodes))
    return tuple((n, per_node + (1 if i < extra else 0)) for i, n in enumerate(nodes))


def _gpus_of(job: Any) -> int:
    """GPUs of the whole Job: the pod's GPU limit times its parallelism."""
    pods = max(1, job.spec.parallelism or 1)
    total = 0
    for container in job.spec.template.spec.containers or []:
        limits = (container.resources.limits or {}) if container.resources else {}
        total += int(str(limits.get(GPU, "0")) or 0)
    return total * pods


def _foreign(job: Any) -> ForeignJob:
    annotations = job.metadata.annotations or {}
    labels = job.metadata.labels or {}
    job_class = annotations.get(CLASS, "training")
    if job_class not in ("training", "inference", "best-effort"):
        job_class = "training"
    estimate = annotations.get(ESTIMATE, "")
    return ForeignJob(
        key=f"{job.metadata.namespace}/{job.metadata.name}",
        user=labels.get("ilucid.io/user", job.metadata.namespace),
        gpus=_gpus_of(job),
        job_class=job_class,
        name=job.metadata.name,
        estimate_s=float(estimate) if estimate.replace(".", "", 1).isdigit() else None,
    )


class LeaseElector:
    """Leader election on a coordination.k8s.io/v1 Lease, so two replicas never both admit.

    The holder renews the Lease every pass; another replica takes it only once
    ``renewTime + leaseDurationSeconds`` has passed, and every write carries
    the Lease's resourceVersion, so of two replicas racing for it the API
    server lets exactly one win (the other gets 409 Conflict).
    """

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        name: str,
        identity: str,
        duration_s: float = 15.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        from kubernetes import client

        self.api: Any = client.CoordinationV1Api(api_client)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.duration_s = duration_s
        self.clock = clock
        self.leading = False

    def _stamp(self) -> str:
        moment = datetime.datetime.fromtimestamp(self.clock(), datetime.UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def _spec(self, acquired: str | None, transitions: int) -> dict[str, Any]:
        now = self._stamp()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.duration_s)),
            "acquireTime": acquired or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def try_lead(self) -> bool:
        """Acquire or renew the Lease; whether this replica leads now."""
        from kubernetes.client.exceptions import ApiException

        try:
            try:
                lease = self.api.read_namespaced_lease(self.name, self.namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                body = {
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(None, 0),
                }
                self.api.create_namespaced_lease(self.namespace, body)
                self.leading = True
                return True
            spec = lease.spec
            holder = spec.holder_identity
            renewed = spec.renew_time.timestamp() if spec.renew_time else 0.0
            duration = spec.lease_duration_seconds or self.duration_s
            if holder != self.identity and self.clock() < renewed + duration:
                self.leading = False
                return False
            mine = holder == self.identity
            acquired = (
                spec.acquire_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                if mine and spec.acquire_time
                else None
            )
            transitions = (spec.lease_transitions or 0) + (0 if mine else 1)
            body = {
                "metadata": {
                    "name": self.name,
                    "namespace": self.namespace,
                    "resourceVersion": lease.metadata.resource_version,
                },
                "spec": self._spec(acquired, transitions),
            }
            self.api.replace_namespaced_lease(self.name, self.namespace, body)
            self.leading = True
            return True
        except ApiException as exc:
            if exc.status == 409:  # another replica won the race
                self.leading = False
                return False
            raise _api_error(exc) from None
        except Exception as exc:
            self.leading = False
            raise _api_error(exc) from None

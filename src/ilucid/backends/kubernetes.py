"""The Kubernetes backend: ilucid admits suspended workloads; kube-scheduler still binds pods.

A site's users create batch/v1 Jobs, JobSets (``jobset.x-k8s.io/v1alpha2``) or
Kubeflow PyTorchJobs (``kubeflow.org/v1``) labelled ``ilucid.io/queue`` and
suspended (by hand, by their tooling, or through a site's mutating admission
policy). ilucid accepts each as one of its jobs (annotation ``ilucid.io/job-id``),
and when the core starts it writes the chosen nodes as required node affinity into
every pod template and un-suspends it, in one JSON patch (``kubernetes_kinds``).
Preemption suspends it again: its controller deletes all its pods (they get SIGTERM
and their grace period to checkpoint), so a gang stops as a whole. Completion and
failure are read from its conditions. ilucid never creates, deletes or binds pods.

Nodes and workloads are listed once and then watched (``kubernetes_watch``):
``observe`` reads what the watches keep in memory and makes no API call. Every
node with GPUs is in the observed cluster; the cordoned and not-Ready ones are in
``excluded_nodes()`` with the reason. A running workload placed on a node that has
been not Ready for ``lost_after_s`` is suspended and reported with the reason, so
that it is placed again rather than waiting for a node that is gone.

Why a Job waits is visible from ``kubectl describe``: an ``IlucidPending``
condition on a Job and an Event on any kind, written only when the sentence
changes. Only workloads carrying the queue label are ever read or written.

Provisioned pools (``kubernetes_provisioning``): node groups cluster-autoscaler
scales up on a ProvisioningRequest. Their nodes are the pool's virtual slots in the
observed cluster; a job placed there is admitted once its request is Provisioned.
"""

from __future__ import annotations

import datetime
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ilucid.backends.base import (
    BackendUnavailable,
    ForeignJob,
    Observation,
    ObservedJob,
    PowerState,
    ProcessState,
)
from ilucid.backends.kubernetes_kinds import JOB, KINDS, Kind, gpu_type_of, node_inventory
from ilucid.backends.kubernetes_progress import pod_progress
from ilucid.backends.kubernetes_provisioning import (
    FOR_JOB,
    GROUP,
    PLURAL,
    POOL,
    SLOTS,
    VERSION,
    ProvisionedPool,
    on_hosts,
    pod_templates,
    pool_template,
    provisioning_request,
    request_name,
    slot_states,
    slots_of,
    standing,
)
from ilucid.backends.kubernetes_watch import Informer, api_error, key_of, status_of
from ilucid.backends.progress_memo import ProgressMemo
from ilucid.core import Cluster, Node

__all__ = ["KubernetesBackend"]

logger = logging.getLogger(__name__)

QUEUE_LABEL = "ilucid.io/queue"
JOB_ID = "ilucid.io/job-id"
CLASS = "ilucid.io/class"
ESTIMATE = "ilucid.io/estimate-seconds"
PLACED_ON = "ilucid.io/placed-on"
PENDING_CONDITION = "IlucidPending"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"

Obj = dict[str, Any]


class KubernetesBackend:
    name = "kubernetes"

    def __init__(
        self,
        api_client: Any,
        namespace: str | None = None,
        queue_label: str = QUEUE_LABEL,
        kinds: Sequence[str] = tuple(KINDS),
        resync_s: float = 300.0,
        watch_s: float = 240.0,
        lost_after_s: float = 60.0,
        sync_timeout_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        pools: Sequence[ProvisionedPool] = (),
    ) -> None:
        from kubernetes import client

        # typed Any: plain dict bodies and answers instead of the client's models
        self.custom: Any = client.CustomObjectsApi(api_client)
        self.core: Any = client.CoreV1Api(api_client)
        self.namespace = namespace  # None: every namespace
        self.queue_label = queue_label
        self.kinds = [KINDS[plural] for plural in kinds]
        self.lost_after_s, self.sync_timeout_s, self.clock = lost_after_s, sync_timeout_s, clock

        def informer(what: str, call: Callable[..., Any], selector: str | None) -> Informer:
            # every kind but Job is a CRD that may not be installed
            optional = what != JOB.plural and selector is not None
            return Informer(what, call, selector, resync_s, watch_s, optional, clock)

        self.nodes = informer("nodes", self.core.list_node, None)
        self.informers = {
            kind.plural: informer(kind.plural, self._lister(kind), queue_label)
            for kind in self.kinds
        }
        self.pools = _checked(pools)
        #: ilucid's ProvisioningRequests (only watched when a pool is configured; the
        #: API is optional: cluster-autoscaler's CRD may not be installed)
        self.requests = (
            Informer(
                PLURAL,
                self._custom_lister(GROUP, VERSION, PLURAL),
                FOR_JOB,
                resync_s,
                watch_s,
                True,
                clock,
            )
            if self.pools
            else None
        )
        self._failures: dict[str, str] = {}  # job id -> its last request's failure
        self.cluster: Cluster | None = None
        self.excluded: dict[str, str] = {}
        self._down_since: dict[str, float] = {}  # not-Ready node -> when first seen so
        self._inventory_at = -1
        self._jobs: dict[str, tuple[Kind, Obj]] = {}  # ilucid id -> its workload
        self._foreign: list[ForeignJob] = []
        self._lost: dict[str, str] = {}  # ilucid id -> why it was taken off its nodes
        self._published: dict[str, str] = {}
        self._cancelled: set[str] = set()
        self._unreadable: set[str] = set()  # workloads whose resources are not quantities
        self._started = False
        #: each running workload's last progress report (its first pod's log): read at
        #: most every 10 s a workload and 50 workloads a pass (each read is two API calls)
        self._progress = ProgressMemo(clock, per_pass=50)

    def _lister(self, kind: Kind) -> Callable[..., Any]:
        return self._custom_lister(kind.group, kind.version, kind.plural)

    def _custom_lister(self, group: str, version: str, plural: str) -> Callable[..., Any]:
        if self.namespace is None:
            return functools.partial(self.custom.list_cluster_custom_object, group, version, plural)
        return functools.partial(
            self.custom.list_namespaced_custom_object, group, version, self.namespace, plural
        )

    def _everything(self) -> tuple[Informer, ...]:
        requests = (self.requests,) if self.requests is not None else ()
        return (self.nodes, *self.informers.values(), *requests)

    def close(self) -> None:
        """Stop the watches (a backend is otherwise used for the life of the process)."""
        for informer in self._everything():
            informer.stop()

    # -- observing --------------------------------------------------------------------
    def _sync(self) -> None:
        """Start the watches once; the first pass waits for their first lists."""
        everything = self._everything()
        if not self._started:
            self._started = True
            for informer in everything:
                informer.start()
            deadline = time.monotonic() + self.sync_timeout_s
            for informer in everything:
                informer.synced.wait(max(0.0, deadline - time.monotonic()))
        for informer in everything:
            if informer.error is not None:
                raise BackendUnavailable(informer.error)
            if not informer.synced.is_set():
                raise BackendUnavailable(f"Kubernetes API: {informer.what} not listed yet")

    def _inventory(self) -> Cluster:
        if self.cluster is None or self.nodes.generation != self._inventory_at:
            # a provisioned pool's real nodes are its slots in the core's view
            labels = {pool.label for pool in self.pools}
            nodes = [
                node
                for node in self.nodes.snapshot()
                if not labels & set(((node["metadata"].get("labels")) or {}).items())
            ]
            try:
                cluster, self.excluded, down = node_inventory(nodes)
            except ValueError as exc:  # a node's quantity is not one: say which, retry
                raise BackendUnavailable(f"Kubernetes nodes: {exc}") from None
            slots: tuple[Node, ...] = sum((pool.slot_nodes() for pool in self.pools), ())
            cluster = Cluster(cluster.nodes + slots)
            self._inventory_at = self.nodes.generation
            if cluster != self.cluster:  # a node came or went
                self.cluster = cluster
            now = self.clock()
            self._down_since = {n: self._down_since.get(n, now) for n in down}
        return self.cluster

    def observe(self) -> Observation:
        self._sync()
        cluster = self._inventory()
        ours: dict[str, tuple[Kind, Obj]] = {}
        foreign: list[ForeignJob] = []
        for kind in self.kinds:
            for obj in self.informers[kind.plural].snapshot():
                job_id = (obj["metadata"].get("annotations") or {}).get(JOB_ID)
                if job_id:
                    ours[job_id] = (kind, obj)
                elif kind.suspended(obj) and kind.finished(obj) is None:
                    try:
                        foreign.append(_foreign(kind, obj))
                    except ValueError as exc:  # not accepted: ilucid could not book it
                        if key_of(obj) not in self._unreadable:
                            logger.warning("ilucid: not accepting %s", exc)
                        self._unreadable.add(key_of(obj))
        self._jobs, self._foreign = ours, foreign
        observed = {job_id: self._as_observed(job_id, *entry) for job_id, entry in ours.items()}
        self._progress.end_pass(
            j for j, seen in observed.items() if seen.state is ProcessState.RUNNING
        )
        return Observation(cluster, observed)

    def _as_observed(self, job_id: str, kind: Kind, obj: Obj) -> ObservedJob:
        parts = _placed_on(kind, obj)
        finished = kind.finished(obj)
        if finished is not None:
            code = 0 if finished == "Complete" else 1
            if job_id in self._cancelled:
                code = -15
            return ObservedJob(job_id, ProcessState.EXITED, (), code, parts)
        why = self._lost.get(job_id)
        if not kind.suspended(obj):
            lost = self._lost_nodes(parts)
            if not lost:
                meta = obj["metadata"]
                progress = self._progress.get(
                    job_id,
                    lambda: pod_progress(self.core, kind.plural, meta["namespace"], meta["name"]),
                )
                return ObservedJob(job_id, ProcessState.RUNNING, (), None, parts, progress=progress)
            why = "; ".join(f"node {n} went down ({self.excluded.get(n, 'gone')})" for n in lost)
            self._lost[job_id] = why
            obj = self._suspend(job_id, kind, obj)
        if kind.active(obj):
            return ObservedJob(job_id, ProcessState.STOPPING, (), None, parts, why)
        if job_id in self._cancelled:
            return ObservedJob(job_id, ProcessState.EXITED, (), -15, parts)
        return ObservedJob(job_id, ProcessState.HELD, (), None, parts, why)

    def _lost_nodes(self, parts: Sequence[tuple[str, int]]) -> list[str]:
        """Nodes of a running placement not Ready for ``lost_after_s``, or deleted."""
        assert self.cluster is not None
        known = {node.name for node in self.cluster.nodes}
        now = self.clock()
        lost = []
        for name, _ in parts:
            since = self._down_since.get(name)
            if name not in known or (since is not None and now - since >= self.lost_after_s):
                lost.append(name)
        return lost

    def excluded_nodes(self) -> dict[str, str]:
        """GPU nodes that take no new pods (cordoned, not Ready), with the reason."""
        return dict(self.excluded)

    def foreign_jobs(self) -> list[ForeignJob]:
        """Suspended labelled workloads that ilucid has not accepted yet."""
        return list(self._foreign)

    def reason(self, job_id: str) -> str | None:
        """A waiting job's ProvisioningRequest in words (its latest condition, or why
        its last one failed), else that its workload is suspended."""
        entry = self._jobs.get(job_id)
        if entry is None or not entry[0].suspended(entry[1]):
            return None
        kind, meta = entry[0], entry[1]["metadata"]
        request = self._request(job_id, meta["namespace"])
        if request is not None:
            return standing(request).words
        if job_id in self._failures:
            return self._failures[job_id]
        return f"Kubernetes: {kind.kind} {meta['namespace']}/{meta['name']} is suspended"

    # -- acting -----------------------------------------------------------------------------
    def check(self, command: Sequence[str], cwd: str | None, run_as: str | None = None) -> None:
        """Workloads come from Kubernetes itself; the API cannot make one."""
        raise ValueError(
            "on Kubernetes, submit a batch/v1 Job or a JobSet with spec.suspend: true (a"
            " PyTorchJob: spec.runPolicy.suspend: true) and the label"
            f" {self.queue_label} (see deploy/kubernetes/examples); ilucid admits it"
        )

    def _patch(self, kind: Kind, obj: Obj, body: Any, content_type: str | None = None) -> Obj:
        """Patch the workload and hold the answer at once (the watch may lag)."""
        meta = obj["metadata"]
        extra = {"_content_type": content_type} if content_type else {}
        answer: Obj = self.custom.patch_namespaced_custom_object(
            kind.group, kind.version, meta["namespace"], kind.plural, meta["name"], body, **extra
        )
        self.informers[kind.plural].wrote(answer)
        return answer

    def _suspend(self, job_id: str, kind: Kind, obj: Obj) -> Obj:
        try:
            answer = self._patch(kind, obj, kind.suspend_body(True))
        except Exception as exc:
            raise api_error(exc) from None
        self._jobs[job_id] = (kind, answer)
        return answer

    def claim(self, foreign: ForeignJob, job_id: str) -> None:
        """Accept a labelled suspended workload as ilucid's job ``job_id`` (an annotation)."""
        pieces = foreign.key.split("/")  # namespace/name of a Job, else plural/namespace/name
        plural, namespace, name = pieces if len(pieces) == 3 else (JOB.plural, *pieces)
        kind = KINDS[plural]
        obj = self.informers[kind.plural].get(f"{namespace}/{name}")
        if obj is None:
            raise BackendUnavailable(f"Kubernetes: {foreign.key} is not in the watched state")
        body = {"metadata": {"annotations": {JOB_ID: job_id}}}
        try:
            self._jobs[job_id] = (kind, self._patch(kind, obj, body))
        except Exception as exc:
            raise api_error(exc) from None
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
        cpus: float | None = None,
        memory_gb: float | None = None,
    ) -> tuple[int, ...] | None:
        """Admit the workload on the placement's nodes. ``cpus`` and ``memory_gb`` are
        its pods' own requests, read when it was accepted (``Kind.host_needs``), so its
        pods already ask Kubernetes for what the core booked; they are not rewritten
        (the API lets a suspended Job change only scheduling directives, resources only
        from 1.35's MutablePodResourcesForSuspendedJobs on)."""
        entry = self._jobs.get(job_id)
        if entry is None:
            raise ValueError(f"job {job_id}: its Kubernetes workload is gone")
        kind, obj = entry
        if not kind.suspended(obj) or kind.finished(obj) is not None:
            return ()  # admitted already: never twice
        if kind.active(obj):
            return None  # its pods from before a preemption are still terminating
        nodes = sorted({name for name, _ in placement or []})
        pool = self._pool_of(job_id, nodes)
        rewrite: Callable[[Mapping[str, Any]], Obj] | None = None
        if pool is not None:
            if not self._provisioned(job_id, obj, pool, nodes):
                return None  # asked for, not there yet: the service tries every pass
            name = request_name(job_id)
            rewrite = functools.partial(pool_template, pool=pool, request=name, pools=self.pools)
        elif self.pools:  # on-prem: a pool choice of an earlier admission is taken out
            rewrite = functools.partial(on_hosts, nodes=nodes, pools=self.pools)
        try:
            ops = kind.admission(obj, nodes, PLACED_ON, rewrite)
            answer = self._patch(kind, obj, ops, JSON_PATCH)
        except Exception as exc:
            if status_of(exc) in (409, 422):  # changed since read: the next pass retries
                return None
            raise api_error(exc) from None
        self._jobs[job_id] = (kind, answer)
        self._published.pop(job_id, None)
        self._lost.pop(job_id, None)
        return ()

    def stop(self, job_id: str) -> None:
        """Preempt: suspend the workload; all its pods get SIGTERM and their grace period.
        Its ProvisioningRequest, if any, is deleted (a restart asks again)."""
        entry = self._jobs.get(job_id)
        if entry is not None and self.requests is not None:
            request = self._request(job_id, entry[1]["metadata"]["namespace"])
            if request is not None:
                self._delete_request(request)
        if entry is None or entry[0].suspended(entry[1]) or entry[0].finished(entry[1]):
            return
        self._suspend(job_id, *entry)

    def cancel(self, job_id: str) -> None:
        """ilucid never deletes a user's workload: cancelling suspends it for good."""
        self._cancelled.add(job_id)
        self.stop(job_id)

    def forget(self, job_id: str) -> None:
        """The service recorded how the job ended."""
        self._lost.pop(job_id, None)
        self._published.pop(job_id, None)
        self._failures.pop(job_id, None)

    # -- provisioned pools (kubernetes_provisioning) -------------------------------------
    def _pool_of(self, job_id: str, nodes: Sequence[str]) -> ProvisionedPool | None:
        """The pool whose slots the placement names (None: on-prem nodes only)."""
        owners = [pool for pool in self.pools if set(nodes) & set(pool.slots())]
        if not owners:
            return None
        if len(owners) > 1 or not set(nodes) <= set(owners[0].slots()):
            raise ValueError(
                f"job {job_id}: placement {','.join(nodes)} mixes provisioned pool slots"
                " with other nodes (one ProvisioningRequest brings up one pool)"
            )
        return owners[0]

    def _request(self, job_id: str, namespace: str) -> Obj | None:
        if self.requests is None:
            return None
        return self.requests.get(f"{namespace}/{request_name(job_id)}")

    def _provisioned(
        self, job_id: str, workload: Obj, pool: ProvisionedPool, slots: list[str]
    ) -> bool:
        """Whether the job's request is Provisioned; asks for it when there is none.
        A failed request is deleted and its reason raised (ValueError): the service
        records it and tries again later, with a new request."""
        assert self.requests is not None  # there are pools
        if self.requests.missing is not None:
            raise ValueError(
                f"provisioned pool {pool.name}: the ProvisioningRequest API is not served"
                f" ({self.requests.missing}); install cluster-autoscaler's CRD"
            )
        namespace = workload["metadata"]["namespace"]
        request = self._request(job_id, namespace)
        notes = (request or {}).get("metadata", {}).get("annotations") or {}
        if request is not None and notes.get(POOL) != pool.name:  # the core chose anew
            self._delete_request(request)
            request = None
        if request is None:
            self._ask(job_id, workload, pool, slots)
            return False
        now = standing(request)
        if now.failure is not None:
            self._failures[job_id] = now.failure
            self._delete_request(request)
            raise ValueError(now.failure)
        if slots_of(request) != slots:  # other slots of the same pool: say so
            body = {"metadata": {"annotations": {SLOTS: ",".join(slots)}}}
            try:
                answer = self.custom.patch_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, request["metadata"]["name"], body
                )
            except Exception as exc:
                raise api_error(exc) from None
            self.requests.wrote(answer)
        return now.provisioned

    def _ask(self, job_id: str, workload: Obj, pool: ProvisionedPool, slots: list[str]) -> None:
        """Create the PodTemplates and the ProvisioningRequest (one that exists is kept)."""
        assert self.requests is not None
        kind, _ = self._jobs[job_id]
        namespace = workload["metadata"]["namespace"]
        templates = pod_templates(job_id, workload, kind.templates(workload), pool, self.pools)
        request = provisioning_request(job_id, workload, templates, pool, slots)
        try:
            for body, _ in templates:
                _created(self.core.create_namespaced_pod_template, namespace, body)
            answer = _created(
                self.custom.create_namespaced_custom_object,
                GROUP, VERSION, namespace, PLURAL, request,
            )  # fmt: skip
        except ValueError:
            raise
        except Exception as exc:
            raise api_error(exc) from None
        if answer is not None:
            self.requests.wrote(answer)
        self._failures.pop(job_id, None)

    def _delete_request(self, request: Obj) -> None:
        """Delete a request and the PodTemplates it names (gone already: fine)."""
        assert self.requests is not None
        meta = request["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        refs = [s["podTemplateRef"]["name"] for s in request["spec"].get("podSets") or []]
        try:
            _deleted(
                self.custom.delete_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name
            )
            for ref in refs:
                _deleted(self.core.delete_namespaced_pod_template, ref, namespace)
        except Exception as exc:
            raise api_error(exc) from None
        self.requests.deleted(f"{namespace}/{name}")

    def power_states(self) -> dict[str, PowerState]:
        """Each slot: ON under a running job or a Provisioned request, STARTING while a
        request for it is not Provisioned yet, OFF otherwise."""
        running = [
            node
            for kind, obj in self._jobs.values()
            if kind.finished(obj) is None
            for node, _ in _placed_on(kind, obj)
        ]
        requests = self.requests.snapshot() if self.requests is not None else []
        return slot_states(self.pools, requests, running)

    def power_up(self, node: str) -> None:
        """Nothing to do: a job placed on the slot asks for its capacity (start)."""

    def power_down(self, node: str) -> None:
        """Delete the requests still naming the slot, but never a running job's; the
        autoscaler scales the idle nodes down by itself."""
        if self.requests is None:
            return
        running = {
            (obj["metadata"]["namespace"], request_name(job_id))
            for job_id, (kind, obj) in self._jobs.items()
            if not kind.suspended(obj) and kind.finished(obj) is None
        }
        for request in self.requests.snapshot():
            meta = request["metadata"]
            if node in slots_of(request) and (meta["namespace"], meta["name"]) not in running:
                self._delete_request(request)

    def publish_reason(self, job_id: str, why: str) -> bool:
        """Show why a workload waits, in Kubernetes itself: an Event (and on a Job an
        ``IlucidPending`` condition), written only when the sentence changed. Returns
        whether anything was written."""
        entry = self._jobs.get(job_id)
        if entry is None or self._published.get(job_id) == why:
            return False
        kind, obj = entry
        meta = obj["metadata"]
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            if kind is JOB:  # a strategic merge: the Job controller's conditions are kept
                condition = {
                    "type": PENDING_CONDITION,
                    "status": "True",
                    "reason": "WaitingForIlucid",
                    "message": why,
                    "lastProbeTime": now,
                    "lastTransitionTime": now,
                }
                answer = self.custom.patch_namespaced_custom_object_status(
                    kind.group, kind.version, meta["namespace"], kind.plural, meta["name"],
                    {"status": {"conditions": [condition]}}, _content_type=STRATEGIC,
                )  # fmt: skip
                self.informers[kind.plural].wrote(answer)
            self.core.create_namespaced_event(meta["namespace"], _event(kind, meta, why, now))
        except Exception as exc:
            raise api_error(exc) from None
        self._published[job_id] = why
        return True

    def logs(self, job_id: str, stream: str = "stdout", tail_bytes: int = 65536) -> str:
        entry = self._jobs.get(job_id)
        if entry is None:
            return f"(logs of Kubernetes jobs: kubectl logs, job {job_id})\n"
        kind, meta = entry[0], entry[1]["metadata"]
        where = f"-n {meta['namespace']} {kind.kind.lower()}/{meta['name']}"
        return f"(logs of Kubernetes jobs: kubectl logs {where})\n"


def _checked(pools: Sequence[ProvisionedPool]) -> tuple[ProvisionedPool, ...]:
    """The pools, refused (ValueError) when two share a name or a slot name."""
    slots = [slot for pool in pools for slot in pool.slots()]
    if len({pool.name for pool in pools}) < len(pools) or len(set(slots)) < len(slots):
        raise ValueError("provisioned pools: two pools share a name or a slot name")
    return tuple(pools)


def _created(call: Callable[..., Obj], *args: Any) -> Obj | None:
    """Create an object; None when it exists already (asked on an earlier pass). An
    object the API refuses (422) is a ValueError with the API's message."""
    try:
        return call(*args)
    except Exception as exc:
        status = status_of(exc)
        if status == 409:
            return None
        if status == 422:
            raise ValueError(f"Kubernetes API refused it: {_message(exc)}") from None
        raise


def _deleted(call: Callable[..., object], *args: Any) -> None:
    try:
        call(*args)
    except Exception as exc:
        if status_of(exc) != 404:
            raise


def _message(exc: Exception) -> str:
    import json

    try:
        return str(json.loads(getattr(exc, "body", "") or "{}").get("message") or exc)
    except ValueError:
        return str(exc)


def _event(kind: Kind, meta: Mapping[str, Any], why: str, now: str) -> dict[str, Any]:
    namespace, name = meta["namespace"], meta["name"]
    return {
        "metadata": {"generateName": f"{name}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": kind.api_version,
            "kind": kind.kind,
            "name": name,
            "namespace": namespace,
            "uid": meta.get("uid"),
        },
        "reason": "IlucidPending",
        "message": why,
        "type": "Normal",
        "source": {"component": "ilucid"},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


def _placed_on(kind: Kind, obj: Obj) -> tuple[tuple[str, int], ...]:
    annotations = obj["metadata"].get("annotations") or {}
    nodes = [n for n in annotations.get(PLACED_ON, "").split(",") if n]
    if not nodes or kind.suspended(obj):
        return ()
    per_node, extra = divmod(kind.gpus(obj), len(nodes))
    return tuple((n, per_node + (1 if i < extra else 0)) for i, n in enumerate(nodes))


def _foreign(kind: Kind, obj: Obj) -> ForeignJob:
    meta = obj["metadata"]
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    job_class = annotations.get(CLASS, "training")
    if job_class not in ("training", "inference", "best-effort"):
        job_class = "training"
    estimate = str(annotations.get(ESTIMATE, ""))
    shape = kind.shape(obj)
    key = key_of(obj) if kind is JOB else f"{kind.plural}/{key_of(obj)}"
    cpus, memory_gb = kind.host_needs(obj, f"{kind.kind} {key_of(obj)}")
    return ForeignJob(
        key=key,
        user=labels.get("ilucid.io/user", meta["namespace"]),
        gpus=kind.gpus(obj),
        job_class=job_class,
        name=meta["name"],
        estimate_s=float(estimate) if estimate.replace(".", "", 1).isdigit() else None,
        gpu_type=gpu_type_of(kind.templates(obj)),
        nodes=shape[0] if shape else None,
        gpus_per_node=shape[1] if shape else None,
        cpus=cpus,
        memory_gb=memory_gb,
    )

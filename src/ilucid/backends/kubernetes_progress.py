"""A Kubernetes workload's own progress report, read from its first pod's log.

A job that prints ``ILUCID_PROGRESS step=N total=M`` (``docs/progress.md``) says it on
stdout, which Kubernetes keeps as the pod's log. The backend lists the workload's pods
by the label its controller puts on them, takes the first running one by name (the
rank-0 pod of a gang: ``pt-master-0`` before ``pt-worker-0``, index 0 of a Job) and
asks the API server for the end of its log only (``tailLines``, ``limitBytes``). The
backend's :class:`~ilucid.backends.progress_memo.ProgressMemo` decides how often.
"""

from __future__ import annotations

import json
from typing import Any

from ilucid.backends.progress_read import Progress, last_in_output

__all__ = ["LOG_LIMIT_BYTES", "LOG_TAIL_LINES", "POD_LABELS", "pod_progress"]

#: the label each workload kind's controller sets on its pods, to the workload's name
POD_LABELS = {
    "jobs": "job-name",
    "jobsets": "jobset.sigs.k8s.io/jobset-name",
    "pytorchjobs": "training.kubeflow.org/job-name",
}
#: how much of a pod's log is asked for: its last lines, at most this many bytes
LOG_TAIL_LINES = 200
LOG_LIMIT_BYTES = 16384


def pod_progress(core: Any, plural: str, namespace: str, name: str) -> Progress | None:
    """The last report in the log of the workload's first running pod (None: no pod
    runs yet, or its log holds no report). API errors propagate to the caller."""
    label = POD_LABELS.get(plural)
    if label is None:
        return None
    listed = core.list_namespaced_pod(
        namespace, label_selector=f"{label}={name}", _preload_content=False, _request_timeout=10
    )
    pods = json.loads(listed.data).get("items") or []
    running = sorted(
        str(pod["metadata"]["name"])
        for pod in pods
        if (pod.get("status") or {}).get("phase") == "Running"
    )
    if not running:
        return None
    log = core.read_namespaced_pod_log(
        running[0],
        namespace,
        tail_lines=LOG_TAIL_LINES,
        limit_bytes=LOG_LIMIT_BYTES,
        _preload_content=False,
        _request_timeout=10,
    )
    data: bytes = log.data
    # a log cut by limitBytes may start inside a line: its first line is not read
    return last_in_output(data, cut=len(data) >= LOG_LIMIT_BYTES)

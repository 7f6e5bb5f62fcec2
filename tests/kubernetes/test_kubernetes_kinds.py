"""The workload kinds read from the API's JSON (no API server): GPUs and gang shapes,
the admission patch, node affinity merged with the user's own, the GPU type asked for,
and the node inventory with its exclusions."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import jsonpatch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kube_fixtures import gpu_job, gpu_node, jobset, pytorchjob

from ilucid.backends.kubernetes_kinds import (
    JOB,
    JOBSET,
    PYTORCHJOB,
    gpu_type_of,
    node_inventory,
    with_hosts,
)

HOSTS = {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1", "n2"]}
A100 = {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A100"]}


def test_gpus_and_gang_shapes_count_every_replica() -> None:
    assert (JOBSET.gpus(jobset("a", 2, 8, leader=True)), JOBSET.shape(jobset("a", 2, 8))) == (
        16,
        (2, 8),
    )
    assert PYTORCHJOB.gpus(pytorchjob("b", 3, 4)) == 16  # a master and 3 workers
    assert PYTORCHJOB.shape(pytorchjob("b", 3, 4)) == (4, 4)
    parallel = gpu_job("c", 2)
    parallel["spec"]["parallelism"] = 3
    assert (JOB.gpus(parallel), JOB.shape(parallel)) == (6, None), "a Job is no gang"
    fewer = jobset("d", 2, 8)
    fewer["spec"]["replicatedJobs"][0]["template"]["spec"] |= {"parallelism": 4, "completions": 2}
    assert JOBSET.gpus(fewer) == 2 * 2 * 8, "pods per Job: min(parallelism, completions)"
    uneven = pytorchjob("e", 1, 8)
    uneven["spec"]["pytorchReplicaSpecs"]["Master"]["template"] = jobset("x", 1, 4)["spec"][
        "replicatedJobs"
    ][0]["template"]["spec"]["template"]
    assert PYTORCHJOB.shape(uneven) is None, "pods asking different GPU counts"


def test_admission_patch_tests_then_writes_every_template_and_unsuspends() -> None:
    job = pytorchjob("p", 1, 8)
    job["metadata"] |= {"resourceVersion": "7"}
    ops = PYTORCHJOB.admission(job, ["n1", "n2"], "ilucid.io/placed-on")
    assert ops[:2] == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "test", "path": "/spec/runPolicy/suspend", "value": True},
    ]
    admitted = jsonpatch.apply_patch(job, ops)
    assert admitted["spec"]["runPolicy"]["suspend"] is False
    assert admitted["metadata"]["annotations"]["ilucid.io/placed-on"] == "n1,n2"
    for role in ("Master", "Worker"):
        spec = admitted["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"] == [{"matchExpressions": [HOSTS]}]
    stale = copy.deepcopy(job)
    stale["metadata"]["resourceVersion"] = "8"  # changed since read: the patch fails
    try:
        jsonpatch.apply_patch(stale, ops)
    except jsonpatch.JsonPatchTestFailed:
        pass
    else:
        raise AssertionError("a stale admission applied")


def test_node_affinity_keeps_the_users_terms_and_replaces_ilucids_previous_choice() -> None:
    users = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [A100]}]
            }
        },
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
    }
    first = with_hosts(users, ["n1", "n2"])
    terms = first["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [A100, HOSTS]}]
    assert first["podAntiAffinity"] == users["podAntiAffinity"]
    again = with_hosts(first, ["n3"])  # placed elsewhere after a preemption
    terms = again["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][1]["values"] == ["n3"]
    assert with_hosts(first, []) == users, "no placement: only the user's own terms"
    assert with_hosts(None, []) == {}


def test_the_gpu_type_asked_for() -> None:
    by_selector = jobset("s", 2, 8)
    template = by_selector["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    template["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100"}
    assert gpu_type_of(JOBSET.templates(by_selector)) == "NVIDIA-H100"
    by_affinity = pytorchjob("a", 1, 8)
    for spec in by_affinity["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["affinity"] = with_hosts(
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [A100]}]
                    }
                }
            },
            [],
        )
    assert gpu_type_of(PYTORCHJOB.templates(by_affinity)) == "NVIDIA-A100"
    assert gpu_type_of(JOB.templates(gpu_job("any", 1))) is None


def test_inventory_keeps_every_gpu_node_and_says_which_are_down() -> None:
    nodes = [
        gpu_node("b", cordoned=True),
        gpu_node("a"),
        gpu_node("c", ready=False),
        {"metadata": {"name": "cpu"}, "status": {"allocatable": {"cpu": "8"}}},
    ]
    cluster, excluded, down = node_inventory(nodes)
    assert [n.name for n in cluster.nodes] == ["a", "b", "c"]
    assert excluded == {"b": "cordoned (spec.unschedulable)", "c": "not Ready"}
    assert down == {"c"}

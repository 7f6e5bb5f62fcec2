"""Issue 35: cloud capacity for a waiting gang through cluster-autoscaler's
ProvisioningRequest (``autoscaling.x-k8s.io/v1``), on the API emulator.

The emulator checks every ProvisioningRequest against its CRD's own schema and every
PodTemplate against Kubernetes' (``kmock_schema``); the test plays cluster-autoscaler
(it writes the request's conditions, as the autoscaler would) and the JobSet
controller (``gang_controllers``).
"""

from __future__ import annotations

import datetime
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kmock_schema import check_pod_template, check_provisioning_request
from kube_fixtures import Emulator, backend, create, gang_controllers, gpu_job, gpu_node, jobset
from rbac_rules import DEPLOY_DIR, granted, load_manifests

from ilucid.backends.base import PowersNodes, PowerState, ProcessState
from ilucid.backends.kubernetes_provisioning import (
    BEST_EFFORT,
    CLASS_NAME,
    CONSUME,
    ProvisionedPool,
)

GROUP, VERSION, PLURAL = "autoscaling.x-k8s.io", "v1", "provisioningrequests"
H100 = "NVIDIA-H100-80GB-HBM3"
POOL = ProvisionedPool("cloud", nodes=2, gpus_per_node=8, gpu_type=H100)
JOB_ID = "j000012"
REQUEST = "ilucid-j000012"


def seed(emulator: Emulator, workload: dict[str, Any]) -> client.ApiClient:
    """An on-prem node, a node the autoscaler brought up earlier in the pool (labelled
    for it), and the user's suspended workload."""
    api = emulator.api()
    core = client.CoreV1Api(api)
    core.create_node(gpu_node("onprem-1", gpus=8))
    scaled = gpu_node("gke-cloud-7f3a", gpus=8, product=H100)
    scaled["metadata"]["labels"]["ilucid.io/pool"] = "cloud"
    core.create_node(scaled)
    create(api, workload)
    return api


def accepted(made: Any, job_id: str = JOB_ID) -> None:
    """The first pass: the workload is observed and claimed as ``job_id``."""
    made.observe()
    (foreign,) = made.foreign_jobs()
    made.claim(foreign, job_id)


def until(check: Callable[[], Any], what: str, timeout_s: float = 15.0) -> Any:
    """Wait for the backend's watch to bring a change the test wrote."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen in {timeout_s} s: {what}")
        time.sleep(0.02)


def request(api: client.ApiClient, name: str = REQUEST) -> dict[str, Any] | None:
    try:
        return dict(
            client.CustomObjectsApi(api).get_namespaced_custom_object(
                GROUP, VERSION, "team-a", PLURAL, name
            )
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def template(api: client.ApiClient, name: str) -> dict[str, Any] | None:
    core = client.CoreV1Api(api)
    try:
        answer = core.read_namespaced_pod_template(name, "team-a", _preload_content=False)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return dict(json.loads(answer.data))


def autoscaler_says(api: client.ApiClient, *conditions: tuple[str, str, str, str]) -> None:
    """What cluster-autoscaler writes: the request's conditions (type, status, reason,
    message), in its status subresource."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "status": {
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": now}
                for t, s, r, m in conditions
            ]
        }
    }
    client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        GROUP, VERSION, "team-a", PLURAL, REQUEST, body
    )


def stored_jobset(api: client.ApiClient, name: str = "train") -> dict[str, Any]:
    return dict(
        client.CustomObjectsApi(api).get_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", "team-a", "jobsets", name
        )
    )


def test_a_gang_on_pool_slots_is_admitted_only_when_its_request_is_provisioned(
    emulator: Emulator,
) -> None:
    api = seed(emulator, jobset("train", replicas=2, gpus=8))
    made = backend(api, pools=[POOL])
    assert isinstance(made, PowersNodes)
    accepted(made)
    nodes = {node.name: node for node in made.observe().cluster.nodes}
    # the core plans on the slots; the autoscaler's own node is not counted twice
    assert set(nodes) == {"onprem-1", "cloud-0", "cloud-1"}
    assert (nodes["cloud-0"].num_gpus, nodes["cloud-0"].gpu_type) == (8, H100)
    assert nodes["cloud-1"].labels == {"pool": "cloud"}
    assert made.power_states() == {"cloud-0": PowerState.OFF, "cloud-1": PowerState.OFF}

    placement = [("cloud-0", 8), ("cloud-1", 8)]
    assert made.start(JOB_ID, [], 16, placement=placement) is None
    asked = request(api)
    assert asked is not None, "no ProvisioningRequest was created"
    assert check_provisioning_request(asked) is None  # the CRD's schema (the emulator too)
    assert asked["spec"]["provisioningClassName"] == BEST_EFFORT
    assert asked["spec"]["podSets"] == [{"podTemplateRef": {"name": f"{REQUEST}-0"}, "count": 2}]
    owner = asked["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("JobSet", "train")
    pods = template(api, f"{REQUEST}-0")
    assert pods is not None and check_pod_template(pods) is None
    spec = pods["template"]["spec"]
    assert spec["nodeSelector"] == {"ilucid.io/pool": "cloud"}
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert pods["template"]["metadata"]["annotations"][CONSUME] == REQUEST
    assert "not Accepted" in (made.reason(JOB_ID) or "")
    assert made.power_states() == {"cloud-0": PowerState.STARTING, "cloud-1": PowerState.STARTING}

    # asked once: every later pass finds it
    assert made.start(JOB_ID, [], 16, placement=placement) is None
    creates = [r for r in emulator.requests() if str(r.method).upper().endswith("POST")]
    assert sum(1 for r in creates if r.resource and r.resource.plural == PLURAL) == 1
    autoscaler_says(
        api,
        ("Accepted", "True", "Accepted", "ProvisioningRequest accepted"),
        ("Provisioned", "False", "CapacityIsNotFound", "scaling up node group cloud-h100"),
    )
    said = until(
        lambda: "Accepted, not" in (made.reason(JOB_ID) or "") and made.reason(JOB_ID),
        "the request's Accepted condition",
    )
    assert said == (
        f"ProvisioningRequest {REQUEST}: Accepted, not Provisioned yet:"
        " (CapacityIsNotFound): scaling up node group cloud-h100"
    )
    assert made.start(JOB_ID, [], 16, placement=placement) is None
    assert stored_jobset(api)["spec"]["suspend"] is True

    autoscaler_says(
        api,
        ("Accepted", "True", "Accepted", "ProvisioningRequest accepted"),
        ("Provisioned", "True", "Provisioned", "capacity is provisioned"),
    )
    until(lambda: made.start(JOB_ID, [], 16, placement=placement) == (), "Provisioned=True")
    admitted = stored_jobset(api)
    assert admitted["spec"]["suspend"] is False
    assert admitted["metadata"]["annotations"]["ilucid.io/placed-on"] == "cloud-0,cloud-1"
    for replicated in admitted["spec"]["replicatedJobs"]:
        pod = replicated["template"]["spec"]["template"]
        assert pod["spec"]["nodeSelector"] == {"ilucid.io/pool": "cloud"}
        assert "affinity" not in pod["spec"], "no node affinity to slots that do not exist"
        assert pod["metadata"]["annotations"] == {CONSUME: REQUEST, CLASS_NAME: BEST_EFFORT}
    gang_controllers(api)
    seen = until(
        lambda: (job := made.observe().jobs[JOB_ID]).state is ProcessState.RUNNING and job,
        "the JobSet running",
    )
    assert seen.parts == (("cloud-0", 8), ("cloud-1", 8)), "the core's slots, as decided"
    assert made.power_states() == {"cloud-0": PowerState.ON, "cloud-1": PowerState.ON}


@pytest.mark.parametrize(
    ("conditions", "kind"),
    [
        ([("Failed", "True", "OutOfResources", "no H100 left in europe-west4-a")], "Failed"),
        (
            [
                ("Provisioned", "True", "Provisioned", "capacity is provisioned"),
                ("BookingExpired", "True", "BookingExpired", "no pods consumed it in 10m"),
            ],
            "BookingExpired",
        ),
        (
            [("CapacityRevoked", "True", "CapacityRevoked", "the VMs were preempted")],
            "CapacityRevoked",
        ),
    ],
)
def test_a_failed_request_is_explained_and_start_raises_naming_it(
    emulator: Emulator, conditions: list[tuple[str, str, str, str]], kind: str
) -> None:
    api = seed(emulator, gpu_job("train", 8))
    made = backend(api, pools=[POOL])
    accepted(made)
    assert made.start(JOB_ID, [], 8, placement=[("cloud-1", 8)]) is None
    autoscaler_says(api, *conditions)
    _, _, reason, message = conditions[-1]
    words = f"ProvisioningRequest {REQUEST}: {kind} ({reason}): {message}"
    until(lambda: made.reason(JOB_ID) == words, f"the {kind} condition in reason()")
    with pytest.raises(ValueError, match=rf"{kind} \({reason}\): {message}"):
        made.start(JOB_ID, [], 8, placement=[("cloud-1", 8)])
    # that attempt is over: its request and template are gone, the reason stays
    assert request(api) is None and template(api, f"{REQUEST}-0") is None
    assert made.reason(JOB_ID) == words
    assert made.power_states()["cloud-1"] is PowerState.OFF
    job = client.BatchV1Api(api).read_namespaced_job("train", "team-a")
    assert job.spec.suspend is True
    # the service's retry asks again, with a new request
    assert made.start(JOB_ID, [], 8, placement=[("cloud-1", 8)]) is None
    assert request(api) is not None


def test_power_down_and_cancel_delete_the_request_and_its_template(emulator: Emulator) -> None:
    api = seed(emulator, gpu_job("train", 8))
    made = backend(api, pools=[POOL])
    accepted(made)
    assert made.start(JOB_ID, [], 8, placement=[("cloud-0", 8)]) is None
    made.power_up("cloud-0")  # nothing to do: the request is per job
    made.power_down("cloud-1")  # not this job's slot: kept
    assert request(api) is not None
    made.power_down("cloud-0")
    assert request(api) is None and template(api, f"{REQUEST}-0") is None
    assert made.power_states()["cloud-0"] is PowerState.OFF

    assert made.start(JOB_ID, [], 8, placement=[("cloud-0", 8)]) is None
    assert request(api) is not None
    made.cancel(JOB_ID)
    assert request(api) is None and template(api, f"{REQUEST}-0") is None
    assert client.BatchV1Api(api).read_namespaced_job("train", "team-a").spec.suspend is True


def test_an_on_prem_admission_after_a_pool_one_takes_the_pool_choice_out(
    emulator: Emulator,
) -> None:
    api = seed(emulator, gpu_job("train", 8))
    made = backend(api, pools=[POOL])
    accepted(made)
    assert made.start(JOB_ID, [], 8, placement=[("cloud-0", 8)]) is None
    autoscaler_says(api, ("Provisioned", "True", "Provisioned", "capacity is provisioned"))
    until(lambda: made.start(JOB_ID, [], 8, placement=[("cloud-0", 8)]) == (), "Provisioned")
    batch = client.BatchV1Api(api)
    until(lambda: made.observe().jobs[JOB_ID].state is ProcessState.RUNNING, "admitted")
    made.stop(JOB_ID)  # preempted: suspended, its request deleted
    assert request(api) is None
    assert batch.read_namespaced_job("train", "team-a").spec.suspend is True
    until(lambda: made.observe().jobs[JOB_ID].state is not ProcessState.RUNNING, "suspended")
    with pytest.raises(ValueError, match="mixes provisioned pool slots"):
        made.start(JOB_ID, [], 16, placement=[("onprem-1", 8), ("cloud-0", 8)])
    assert made.start(JOB_ID, [], 8, placement=[("onprem-1", 8)]) == ()
    pod = batch.read_namespaced_job("train", "team-a").spec.template
    assert not pod.spec.node_selector and not (pod.metadata and pod.metadata.annotations)
    terms = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert terms.node_selector_terms[0].match_expressions[0].values == ["onprem-1"]


def test_the_emulator_refuses_requests_that_break_the_crds_schema(emulator: Emulator) -> None:
    api = emulator.api()
    custom = client.CustomObjectsApi(api)
    good: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ProvisioningRequest",
        "metadata": {"name": REQUEST, "namespace": "team-a"},
        "spec": {
            "provisioningClassName": BEST_EFFORT,
            "podSets": [{"podTemplateRef": {"name": "t"}, "count": 2}],
        },
    }
    broken = [
        ({"podSets": [{"podTemplateRef": {"name": "t"}, "count": 0}]}, "count"),
        ({"podSets": [{"podTemplateRef": {"name": "t"}, "pods": 2}]}, "count"),
        ({"podSets": []}, "podSets"),
        ({"provisioningClassName": "Best Effort"}, "provisioningClassName"),
        ({"parameters": {"ValidUntilSeconds": 600}}, "parameters"),
    ]
    for change, field in broken:
        body = {**good, "spec": {**good["spec"], **change}}
        with pytest.raises(ApiException) as refused:
            custom.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, body)
        assert refused.value.status == 422 and field in str(refused.value.body), change
    custom.create_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, good)
    with pytest.raises(ApiException) as refused:  # the spec is immutable
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, "team-a", PLURAL, REQUEST, {"spec": {"provisioningClassName": "x.y"}}
        )
    assert refused.value.status == 422 and "immutable" in str(refused.value.body)
    with pytest.raises(ApiException) as refused:  # a condition needs its reason
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, "team-a", PLURAL, REQUEST,
            {"status": {"conditions": [{"type": "Provisioned", "status": "True"}]}},
        )  # fmt: skip
    assert refused.value.status == 422 and "reason" in str(refused.value.body)
    # a PodTemplate too, by Kubernetes' schema (sent as JSON: the typed client would
    # refuse it before sending)
    main = {"name": "main", "image": "pytorch/pytorch"}
    wrong: dict[str, Any] = {
        "metadata": {"name": "t"},
        "template": {"spec": {"containers": [main]}},
    }
    wrong["template"]["spec"]["nodeSelectors"] = {"ilucid.io/pool": "cloud"}  # misspelt
    sent = urllib.request.Request(
        f"{emulator.url}/api/v1/namespaces/team-a/podtemplates",
        json.dumps(wrong).encode(),
        {"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(sent, timeout=10)
    assert answer.value.code == 422 and "nodeSelectors" in answer.value.read().decode()


def test_rbac_provisioning_grants_exactly_the_calls_a_provisioned_pool_makes(
    emulator: Emulator,
) -> None:
    """Every call the backend makes for a pool (as user agent "ilucid") that rbac.yaml
    does not grant is granted by rbac-provisioning.yaml, and every grant there is used."""
    test_api = seed(emulator, gpu_job("train", 8))
    ours = emulator.api()
    ours.user_agent = "ilucid"
    made = backend(ours, pools=[POOL])
    accepted(made)
    assert made.start(JOB_ID, [], 8, placement=[("cloud-0", 8)]) is None  # list, watch, create
    until(lambda: made.requests.events > 0 or made.requests.bookmarks > 0, "the watch open")
    assert made.start(JOB_ID, [], 8, placement=[("cloud-1", 8)]) is None  # patch: new slot
    moved = request(test_api)
    assert (
        moved is not None and moved["metadata"]["annotations"]["ilucid.io/placed-on"] == "cloud-1"
    )
    made.power_down("cloud-1")  # delete
    verbs = {"GET": "list", "POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}
    made_calls = set()
    for call in emulator.requests():
        if call.headers.get("User-Agent") != "ilucid" or call.resource is None:
            continue
        verb = verbs[str(call.method).rsplit(".", 1)[-1].upper()]
        if verb == "list" and call.params.get("watch") == "true":
            verb = "watch"
        made_calls.add((call.resource.group, call.resource.plural, verb))
    base = granted(load_manifests(DEPLOY_DIR / "rbac.yaml"))
    extra = granted(load_manifests(DEPLOY_DIR / "rbac-provisioning.yaml"))
    assert made_calls - base == extra, (
        f"made but not granted: {made_calls - base - extra};"
        f" granted but unused: {extra - made_calls}"
    )


def test_a_pool_from_the_command_line() -> None:
    pool = ProvisionedPool.parse("spot:4:8:NVIDIA-A100-SXM4-80GB:queued-provisioning.gke.io")
    assert (pool.name, pool.nodes, pool.gpus_per_node) == ("spot", 4, 8)
    assert pool.provisioning_class == "queued-provisioning.gke.io"
    assert pool.label == ("ilucid.io/pool", "spot")
    assert pool.slots() == ["spot-0", "spot-1", "spot-2", "spot-3"]
    assert ProvisionedPool.parse("cloud:2:8:H100").provisioning_class == BEST_EFFORT
    for wrong in ("cloud:2:8", "cloud:two:8:H100", "Cloud_1:2:8:H100", "cloud:0:8:H100"):
        with pytest.raises(ValueError, match=r"cloud|Cloud_1"):
            ProvisionedPool.parse(wrong)

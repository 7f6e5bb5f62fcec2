"""Issue 18: the Kubernetes backend lists once and then watches (resourceVersion,
bookmarks, a periodic resync, relisting after 410 Gone), and its inventory follows the
cluster, against the API emulator through the official client's list and watch calls.

The API calls are counted from what the emulator received: a list is a GET on the
collection without ``watch``, a watch the same with ``watch=true``.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kube_fixtures import Emulator, backend, create, gang_controllers, gpu_job, gpu_node, jobset

from ilucid.backends.base import BackendUnavailable, ProcessState
from ilucid.backends.kubernetes import KubernetesBackend


def calls(emulator: Emulator, watching: bool) -> Counter[str]:
    """Lists (or watches) per resource, as the emulator received them."""
    counted: Counter[str] = Counter()
    for request in emulator.requests():
        collection = str(request.method).endswith("GET") and request.name is None
        watch = request.params.get("watch") == "true"
        if collection and request.resource and watch is watching:
            counted[request.resource.plural] += 1
    return counted


def until(check: Callable[[], object], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def started(emulator: Emulator, **options: object) -> tuple[KubernetesBackend, client.ApiClient]:
    api = emulator.api()
    client.CoreV1Api(api).create_node(gpu_node("gpu-a"))
    client.CoreV1Api(api).create_node(gpu_node("gpu-b", gpus=4))
    made = backend(api, **options)
    made.observe()
    return made, api


def foreign(made: KubernetesBackend) -> set[str]:
    made.observe()
    return {job.key for job in made.foreign_jobs()}


def test_after_one_list_a_new_job_comes_by_the_watch_and_observe_calls_nothing(
    emulator: Emulator,
) -> None:
    made, api = started(emulator)
    assert calls(emulator, watching=False) == {
        "nodes": 1,
        "jobs": 1,
        "jobsets": 1,
        "pytorchjobs": 1,
    }
    create(api, gpu_job("late", 2))
    until(lambda: "team-a/late" in foreign(made))
    assert calls(emulator, watching=False)["jobs"] == 1, "seen without listing again"
    before = len(emulator.requests())
    for _ in range(50):
        made.observe()
    assert len(emulator.requests()) == before, "observe reads memory only"


def test_a_watch_that_expires_is_survived_by_listing_again(emulator: Emulator) -> None:
    emulator.handler.bookmark_s = None  # no bookmarks: the watches' versions fall behind
    made, api = started(emulator)
    client.BatchV1Api(api).create_namespaced_job("team-a", gpu_job("other", 1, queue=None))
    emulator.server.call(emulator.handler.compact)  # 410 for any older version
    until(
        lambda: calls(emulator, watching=False) == dict.fromkeys(made.informers, 2) | {"nodes": 2}
    )
    assert made.informers["jobs"].expired == 1 and made.nodes.expired == 1
    create(api, gpu_job("after", 2))
    until(lambda: "team-a/after" in foreign(made))
    assert calls(emulator, watching=False)["jobs"] == 2, "one list per expiry, no more"


def test_bookmarks_keep_a_quiet_watch_resumable(emulator: Emulator) -> None:
    emulator.handler.bookmark_s = 0.1
    made, api = started(emulator)
    # a change this watch does not select moves the server's version, not the watch's
    client.BatchV1Api(api).create_namespaced_job("team-a", gpu_job("other", 1, queue=None))
    latest = str(emulator.handler._rv)
    until(lambda: made.informers["jobs"].resource_version == latest)
    assert made.informers["jobs"].bookmarks > 0
    emulator.server.call(emulator.handler.compact)  # every watch ends; resumed, not expired
    until(lambda: calls(emulator, watching=True)["jobs"] >= 2)
    create(api, gpu_job("after", 2))
    until(lambda: "team-a/after" in foreign(made))
    assert made.informers["jobs"].expired == 0
    assert calls(emulator, watching=False)["jobs"] == 1


def test_a_lost_event_is_healed_by_the_periodic_resync(emulator: Emulator) -> None:
    made, api = started(emulator, resync_s=1.0)
    emulator.handler.muted = True  # the watch loses what happens now
    create(api, gpu_job("unheard", 2))
    time.sleep(0.3)
    assert "team-a/unheard" not in foreign(made)
    until(lambda: "team-a/unheard" in foreign(made), timeout=5)
    assert calls(emulator, watching=False)["jobs"] >= 2
    emulator.handler.muted = False


def test_an_api_outage_is_reported_by_observe_and_healed_after(emulator: Emulator) -> None:
    made, api = started(emulator)
    emulator.server.call(lambda: emulator.handler.fail(503))
    with pytest.raises(BackendUnavailable, match="503"):
        until(lambda: made.informers["jobs"].error is not None)
        made.observe()
    emulator.server.call(lambda: emulator.handler.fail(None))
    create(api, gpu_job("back", 1))
    everything = (made.nodes, *made.informers.values())
    until(lambda: all(informer.error is None for informer in everything), timeout=10)
    until(lambda: "team-a/back" in foreign(made), timeout=10)


def test_a_kind_not_installed_is_left_alone(emulator: Emulator) -> None:
    from kmock._internal import references

    del emulator.handler.resources[references.resource("kubeflow.org", "v1", "pytorchjobs")]
    made, _ = started(emulator)
    assert made.informers["pytorchjobs"].missing == "pytorchjobs: Kubernetes API: 404 Not Found"
    assert made.informers["jobsets"].synced.is_set() and not made.informers["jobsets"].missing


def test_cordoning_a_node_excludes_it_within_one_pass(emulator: Emulator) -> None:
    made, api = started(emulator)
    core = client.CoreV1Api(api)
    assert made.excluded_nodes() == {}
    cluster = made.observe().cluster
    core.patch_node("gpu-b", {"spec": {"unschedulable": True}})
    until(lambda: made.observe() and made.excluded_nodes(), timeout=1.0)  # a pass is 2 s
    assert made.excluded_nodes() == {"gpu-b": "cordoned (spec.unschedulable)"}
    assert made.observe().cluster == cluster, "still in the cluster: its jobs stay accounted"
    core.patch_node("gpu-b", {"spec": {"unschedulable": False}})
    until(lambda: made.observe() and not made.excluded_nodes(), timeout=1.0)
    core.create_node(gpu_node("gpu-new", gpus=2))
    until(lambda: "gpu-new" in [n.name for n in made.observe().cluster.nodes], timeout=1.0)
    assert calls(emulator, watching=False)["nodes"] == 1


def test_a_running_gang_on_a_node_that_goes_down_is_suspended_and_said_why(
    emulator: Emulator,
) -> None:
    made, api = started(emulator, lost_after_s=0.0)
    create(api, jobset("train", 2, 4))
    until(lambda: "jobsets/team-a/train" in foreign(made))
    [job] = made.foreign_jobs()
    made.claim(job, "j1")
    made.observe()
    assert made.start("j1", [], 8, placement=[("gpu-a", 4), ("gpu-b", 4)]) == ()
    gang_controllers(api)
    until(lambda: made.observe().jobs["j1"].state is ProcessState.RUNNING)
    client.CoreV1Api(api).patch_node_status(
        "gpu-b", {"status": {"conditions": [{"type": "Ready", "status": "False",
                                             "reason": "KubeletNotReady"}]}}
    )  # fmt: skip
    until(lambda: made.observe().jobs["j1"].state is not ProcessState.RUNNING)
    assert made.excluded_nodes() == {"gpu-b": "not Ready: KubeletNotReady"}
    gang_controllers(api)
    until(lambda: made.observe().jobs["j1"].state is ProcessState.HELD)
    held = made.observe().jobs["j1"]
    assert held.reason == "node gpu-b went down (not Ready: KubeletNotReady)"
    custom = client.CustomObjectsApi(api)
    stored = custom.get_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", "team-a", "jobsets", "train"
    )
    assert stored["spec"]["suspend"] is True, "suspended as a whole, to be placed again"

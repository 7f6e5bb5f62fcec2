"""deploy/kubernetes/: schema-valid, least-privilege, hardened, and complete.

Every object is validated offline against the Kubernetes OpenAPI schemas that
kubernetes-validate bundles (strict: unknown fields fail) for 1.30 and for the
newest version it knows. The RBAC grants exactly the calls ilucid's Kubernetes
backend makes (EXPECTED_GRANTS) and nothing broad; the Deployment runs as the
restricted Pod Security Standard asks; kustomization.yaml lists every manifest;
the example jobs are what a user submits (suspended, with the queue label).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rbac_rules import DEPLOY_DIR, ROLE_KINDS, granted, load_manifests, manifest_files

NAMESPACE = "ilucid-system"
SERVICE_ACCOUNT = "ilucid"
IMAGE = "localhost/ilucid:0.1.0"  # what deploy/container/Containerfile builds
PORT = 8787
QUEUE_LABEL = "ilucid.io/queue"
EXAMPLES_DIR = DEPLOY_DIR / "examples"

# (apiGroup, resource, verb): all that ilucid's ServiceAccount may do
EXPECTED_GRANTS = {
    ("", "nodes", "list"),
    ("", "pods", "list"),  # a running workload's pods, for its progress report
    ("", "pods/log", "get"),
    ("", "nodes", "watch"),
    ("batch", "jobs", "list"),
    ("batch", "jobs", "watch"),
    ("batch", "jobs", "patch"),
    ("batch", "jobs/status", "patch"),
    ("jobset.x-k8s.io", "jobsets", "list"),
    ("jobset.x-k8s.io", "jobsets", "watch"),
    ("jobset.x-k8s.io", "jobsets", "patch"),
    ("kubeflow.org", "pytorchjobs", "list"),
    ("kubeflow.org", "pytorchjobs", "watch"),
    ("kubeflow.org", "pytorchjobs", "patch"),
    ("", "events", "create"),
    ("coordination.k8s.io", "leases", "get"),
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "update"),
    # cloud capacity (rbac-provisioning.yaml): ilucid's own ProvisioningRequests and
    # the PodTemplates they name, made and deleted by it
    ("autoscaling.x-k8s.io", "provisioningrequests", "list"),
    ("autoscaling.x-k8s.io", "provisioningrequests", "watch"),
    ("autoscaling.x-k8s.io", "provisioningrequests", "create"),
    ("autoscaling.x-k8s.io", "provisioningrequests", "patch"),
    ("autoscaling.x-k8s.io", "provisioningrequests", "delete"),
    ("", "podtemplates", "create"),
    ("", "podtemplates", "delete"),
}
FORBIDDEN_VERBS = {"*", "delete", "deletecollection", "escalate", "bind", "impersonate"}
#: the only objects ilucid deletes: the ones it made itself for a provisioned pool
DELETED_OWN = {"provisioningrequests", "podtemplates"}
# the backend creates none of these: it only patches the workloads users created
NOT_CREATED = {"pods", "jobs", "jobsets", "pytorchjobs", "tfjobs"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
VERSIONS = sorted(
    {"1.30", kubernetes_validate.utils.major_minor(kubernetes_validate.latest_version())}
)


def _documents() -> list[tuple[str, dict[str, Any]]]:
    """(an id naming file, index and object, the object) for every manifest document."""
    found = []
    for file in manifest_files(DEPLOY_DIR):
        for index, doc in enumerate(load_manifests(file)):
            name = doc.get("metadata", {}).get("name", "?")
            found.append((f"{file.relative_to(DEPLOY_DIR)}#{index}:{doc.get('kind')}/{name}", doc))
    return found


DOCUMENTS = _documents()


def _installed() -> list[dict[str, Any]]:
    """The objects `kubectl apply -k deploy/kubernetes` creates (all but examples/)."""
    return [
        doc
        for file in manifest_files(DEPLOY_DIR)
        if EXAMPLES_DIR not in file.parents
        for doc in load_manifests(file)
    ]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    matching = [doc for doc in docs if doc["kind"] == kind]
    assert len(matching) == 1, f"expected one {kind}, found {len(matching)}"
    return matching[0]


def _roles(docs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (doc for doc in docs if doc["kind"] in ROLE_KINDS)


def _containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod_spec.get("initContainers", []), *pod_spec["containers"]]


# ---------------------------------------------------------------- the files


def test_all_objects_present() -> None:
    present = {(doc["kind"], doc["metadata"]["name"]) for doc in _installed()}
    assert present >= {
        ("Namespace", NAMESPACE),
        ("ServiceAccount", SERVICE_ACCOUNT),
        ("ClusterRole", "ilucid"),
        ("Role", "ilucid-leader-election"),
        ("ClusterRoleBinding", "ilucid"),
        ("RoleBinding", "ilucid-leader-election"),
        ("ClusterRole", "ilucid-provisioning"),
        ("ClusterRoleBinding", "ilucid-provisioning"),
        ("ConfigMap", "ilucid-config"),
        ("Deployment", "ilucid"),
        ("Service", "ilucid"),
    }
    examples = {(doc["kind"], doc["metadata"]["name"]) for doc in load_manifests(EXAMPLES_DIR)}
    assert examples == {("Job", "resnet50-train"), ("Job", "bert-inference")}


def test_loader_is_multi_document_and_skips_kustomization() -> None:
    assert [doc["kind"] for doc in load_manifests(DEPLOY_DIR / "rbac.yaml")] == [
        "ClusterRole",
        "Role",
        "ClusterRoleBinding",
        "RoleBinding",
    ]
    assert all(doc.get("kind") != "Kustomization" for _, doc in DOCUMENTS)
    assert len(DOCUMENTS) == len(load_manifests(DEPLOY_DIR))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("name", "doc"), DOCUMENTS, ids=[name for name, _ in DOCUMENTS])
def test_schema_valid(name: str, doc: dict[str, Any], version: str) -> None:
    # raises ValidationError (a field wrong or unknown) or SchemaNotFoundError (a kind
    # or apiVersion this Kubernetes does not serve)
    kubernetes_validate.validate(doc, version, strict=True)


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((DEPLOY_DIR / "kustomization.yaml").read_text("utf-8"))
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert kustomization["kind"] == "Kustomization"
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed)), "a file listed twice"
    for entry in listed:
        assert (DEPLOY_DIR / entry).is_file(), f"kustomization.yaml lists missing {entry}"
    manifests = {
        str(file.relative_to(DEPLOY_DIR))
        for file in manifest_files(DEPLOY_DIR)
        if EXAMPLES_DIR not in file.parents
    }
    assert set(listed) == manifests
    # the examples are users' jobs, for their own namespaces: never installed
    assert not any(entry.startswith("examples") for entry in listed)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kustomize_builds_the_same_objects() -> None:
    built = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY_DIR)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    rendered = [doc for doc in yaml.safe_load_all(built) if doc]

    def key(doc: dict[str, Any]) -> tuple[str, str]:
        return doc["kind"], doc["metadata"]["name"]

    assert sorted(rendered, key=key) == sorted(_installed(), key=key)


def test_namespaced_objects_live_in_ilucid_system() -> None:
    for doc in _installed():
        if doc["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in doc["metadata"], doc["metadata"]["name"]
        else:
            assert doc["metadata"].get("namespace") == NAMESPACE, doc["metadata"]["name"]


# ---------------------------------------------------------------- RBAC


def test_rbac_grants_exactly_what_the_backend_uses() -> None:
    assert granted(_installed()) == EXPECTED_GRANTS


def test_rbac_least_privilege() -> None:
    roles = list(_roles(_installed()))
    assert {role["kind"] for role in roles} == {"ClusterRole", "Role"}
    for role in roles:
        name = f"{role['kind']}/{role['metadata']['name']}"
        assert "aggregationRule" not in role, f"{name}: aggregated roles grant more"
        for rule in role["rules"]:
            assert "nonResourceURLs" not in rule, name
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                values = rule.get(field, [])
                assert not any("*" in value for value in values), f"{name}: {field} {values}"
            forbidden = FORBIDDEN_VERBS & set(rule["verbs"])
            if set(rule["resources"]) <= DELETED_OWN:
                forbidden -= {"delete"}
            assert not forbidden, f"{name}: {rule['verbs']}"
            for resource in rule["resources"]:
                # the only subresources: jobs/status (the IlucidPending condition) and
                # pods/log (read, for a workload's progress report)
                assert "/" not in resource or resource in ("jobs/status", "pods/log"), (
                    f"{name}: {resource}"
                )
                assert resource != "secrets", name
                if resource in NOT_CREATED:
                    assert "create" not in rule["verbs"], f"{name}: create {resource}"


def test_no_grant_reads_secrets_or_writes_pods() -> None:
    grants = granted(_installed())
    assert not {g for g in grants if g[1].split("/")[0] == "secrets"}
    # pods: only listed, and only their logs read (a workload's progress report)
    pods = {g for g in grants if g[1].split("/")[0] == "pods"}
    assert pods <= {("", "pods", "list"), ("", "pods/log", "get")}
    assert not {g for g in grants if g[2] in FORBIDDEN_VERBS and g[1] not in DELETED_OWN}
    assert not {g for g in grants if g[2] in FORBIDDEN_VERBS - {"delete"}}
    assert not {g for g in grants if g[1] in NOT_CREATED and g[2] == "create"}
    assert not {g for g in grants if "*" in "".join(g)}


def test_lease_access_is_namespaced_and_named() -> None:
    docs = _installed()
    role = _one(docs, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    # leases only through the Role: no ClusterRole reaches a Lease anywhere
    cluster_roles = [doc for doc in docs if doc["kind"] == "ClusterRole"]
    assert not {g for g in granted(cluster_roles) if g[1] == "leases"}
    assert granted([role]) == {g for g in EXPECTED_GRANTS if g[1] == "leases"}
    lease = _one(docs, "ConfigMap")["data"]["ILUCID_LEASE_NAME"]
    for rule in role["rules"]:
        # create cannot be narrowed to a name; get and update are, to ilucid's Lease
        if rule["verbs"] == ["create"]:
            assert "resourceNames" not in rule
        else:
            assert rule.get("resourceNames") == [lease], rule


def test_bindings_give_the_roles_to_ilucid_only() -> None:
    docs = _installed()
    account = _one(docs, "ServiceAccount")
    assert account["metadata"]["name"] == SERVICE_ACCOUNT
    assert account["metadata"]["namespace"] == NAMESPACE
    subject = {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    roles = {(doc["kind"], doc["metadata"]["name"]): doc for doc in _roles(docs)}
    bound = set()
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        for binding in (doc for doc in docs if doc["kind"] == kind):
            ref = binding["roleRef"]
            assert ref["apiGroup"] == "rbac.authorization.k8s.io"
            assert ref["kind"] == role_kind, f"{kind} must bind a {role_kind}"
            role = roles[(role_kind, ref["name"])]
            if kind == "RoleBinding":
                assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]
            assert binding["subjects"] == [subject]
            bound.add((role_kind, ref["name"]))
    assert bound == set(roles), "a role nobody holds, or a binding to nothing"


# ---------------------------------------------------------------- the service


def test_configmap_settings() -> None:
    data = _one(_installed(), "ConfigMap")["data"]
    assert data["ILUCID_POLICY"] == "tiered"
    assert data["ILUCID_QUEUE_LABEL"] == QUEUE_LABEL
    assert float(data["ILUCID_RECONCILE_INTERVAL"]) > 0
    assert data["ILUCID_LEASE_NAME"] == "ilucid-leader"
    assert data["ILUCID_LEASE_DURATION_SECONDS"] == "15"
    assert data["ILUCID_DB_URL"]


def test_deployment_runs_ilucid_serve() -> None:
    docs = _installed()
    deployment = _one(docs, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2  # one leader, one standby
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT
    assert pod.get("automountServiceAccountToken", True), "the backend needs its API token"
    (container,) = pod["containers"]
    assert container["image"] == IMAGE
    assert container["command"] == ["ilucid"]
    assert container["args"][:9] == [
        "serve",
        "--backend",
        "kubernetes",
        "--host",
        "0.0.0.0",
        "--port",
        str(PORT),
        "--db",
        "$(ILUCID_DB_URL)",
    ]
    config = _one(docs, "ConfigMap")
    assert {"configMapRef": {"name": config["metadata"]["name"]}} in container["envFrom"]
    env = {var["name"]: var for var in container["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    # every $(VAR) in the command line is defined (Kubernetes leaves unknown ones as text)
    defined = set(env) | set(config["data"])
    for arg in [*container.get("command", []), *container["args"]]:
        for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", arg):
            assert var in defined, f"{arg}: {var} is not defined"
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert PORT in ports.values()
    probe = container["readinessProbe"]["httpGet"]
    assert probe["path"] == "/healthz"
    assert ports.get(probe["port"], probe["port"]) == PORT
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= container["resources"][kind].keys(), kind


def _expand(arg: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in a container's command and args."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), arg)


def test_deployment_command_line_parses_with_ilucids_cli() -> None:
    # the args as the container gets them, parsed by `ilucid serve`'s own parser: a flag
    # renamed or dropped in the CLI fails here instead of in a crash-looping pod
    from ilucid.cli.serve import add_service_commands

    docs = _installed()
    config = _one(docs, "ConfigMap")["data"]
    (container,) = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    fields = {"metadata.name": "ilucid-7d9f8-abcde", "metadata.namespace": NAMESPACE}
    env = dict(config)
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "fieldRef" in var.get("valueFrom", {}):
            env[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
    parser = argparse.ArgumentParser(prog="ilucid")
    add_service_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args([_expand(arg, env) for arg in container["args"]])
    assert args.command == "serve"
    assert args.backend == "kubernetes"
    assert (args.host, args.port) == ("0.0.0.0", PORT)
    assert args.db == config["ILUCID_DB_URL"]
    # the ConfigMap's settings reach the service
    assert args.policy == config["ILUCID_POLICY"]
    assert args.interval == float(config["ILUCID_RECONCILE_INTERVAL"])
    assert args.lease == f"{NAMESPACE}/{config['ILUCID_LEASE_NAME']}"
    assert args.lease_duration == float(config["ILUCID_LEASE_DURATION_SECONDS"])


def test_deployment_is_hardened() -> None:
    pod = _one(_installed(), "Deployment")["spec"]["template"]["spec"]
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod.get(host), host
    pod_security = pod.get("securityContext", {})
    for container in _containers(pod):
        name = container["name"]
        security = container["securityContext"]
        effective = {**pod_security, **security}
        assert effective.get("runAsNonRoot") is True, name
        assert effective.get("runAsUser", 1) != 0, name
        assert effective.get("seccompProfile") == {"type": "RuntimeDefault"}, name
        assert security.get("readOnlyRootFilesystem") is True, name
        assert security.get("allowPrivilegeEscalation") is False, name
        assert not security.get("privileged"), name
        assert security["capabilities"].get("drop") == ["ALL"], name
        assert not security["capabilities"].get("add"), name


def test_deployment_writes_only_to_empty_dirs() -> None:
    pod = _one(_installed(), "Deployment")["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    for volume in volumes.values():
        assert volume.keys() == {"name", "emptyDir"}, f"{volume['name']}: only emptyDir"
    for container in _containers(pod):
        mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
        assert set(mounts.values()) <= set(volumes), container["name"]
        assert "/tmp" in mounts, f"{container['name']}: /tmp must be writable"
        # the working directory (where the default --data-dir goes) is a volume too
        if "workingDir" in container:
            assert container["workingDir"] in mounts


def test_service_reaches_the_pods() -> None:
    docs = _installed()
    service = _one(docs, "Service")
    template = _one(docs, "Deployment")["spec"]["template"]
    assert service["spec"].get("type", "ClusterIP") == "ClusterIP"
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    assert port["port"] == PORT
    (container,) = template["spec"]["containers"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert named.get(port["targetPort"], port["targetPort"]) == PORT


# ---------------------------------------------------------------- examples

EXAMPLES = [
    ("suspended-training-job.yaml", "training", 2),
    ("inference-job.yaml", "inference", 1),
]


@pytest.mark.parametrize(("file", "job_class", "gpus"), EXAMPLES)
def test_example_job(file: str, job_class: str, gpus: int) -> None:
    (job,) = load_manifests(EXAMPLES_DIR / file)
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    assert job["spec"]["suspend"] is True, "ilucid starts jobs that are created suspended"
    assert job["metadata"]["labels"][QUEUE_LABEL] == "default"
    annotations = job["metadata"]["annotations"]
    assert annotations["ilucid.io/class"] == job_class
    assert annotations["ilucid.io/estimate-seconds"].isdigit()
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == gpus
    # created in the user's namespace, not ilucid's
    assert "namespace" not in job["metadata"]


def test_every_example_is_a_suspended_queued_job() -> None:
    examples = load_manifests(EXAMPLES_DIR)
    assert len(examples) == len(EXAMPLES)
    for job in examples:
        assert job["kind"] == "Job"
        assert job["spec"]["suspend"] is True
        assert QUEUE_LABEL in job["metadata"]["labels"]

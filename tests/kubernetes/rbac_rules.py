"""Read the manifests under deploy/kubernetes/ and list what their RBAC grants.

Shared by tests/kubernetes/test_manifests.py and by tests that compare the API
calls the Kubernetes backend makes with what its ServiceAccount is granted::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kubernetes"))
    from rbac_rules import DEPLOY_DIR, granted, load_manifests

    assert calls_made <= granted(load_manifests(DEPLOY_DIR / "rbac.yaml"))

A grant is an ``(apiGroup, resource, verb)`` triple, the core group spelled
``""`` (as in a Role's rules). Wildcards are not expanded: the manifests have
none (test_manifests.py asserts it), so a triple is granted exactly when it is
in the set. ``granted`` does not keep a Role's namespace or a rule's
resourceNames: a Role's triples hold only in its own namespace, and a rule with
resourceNames only for those objects (test_manifests.py checks both for the
Lease).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "DEPLOY_DIR",
    "NOT_OBJECTS",
    "ROLE_KINDS",
    "Grant",
    "granted",
    "load_manifests",
    "manifest_files",
]

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
# YAML files there that are not Kubernetes objects
NOT_OBJECTS = frozenset({"kustomization.yaml", "kustomization.yml"})
ROLE_KINDS = ("ClusterRole", "Role")
RBAC_API = "rbac.authorization.k8s.io/"

Grant = tuple[str, str, str]


def manifest_files(path: Path | str = DEPLOY_DIR) -> list[Path]:
    """The YAML files holding Kubernetes objects: ``path`` itself when it is a file,
    else every *.yaml / *.yml under it (recursively, sorted), less kustomization.yaml."""
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise FileNotFoundError(f"no manifests at {root}")
    return sorted(
        file
        for file in root.rglob("*")
        if file.is_file() and file.suffix in {".yaml", ".yml"} and file.name not in NOT_OBJECTS
    )


def load_manifests(path: Path | str = DEPLOY_DIR) -> list[dict[str, Any]]:
    """Every YAML document in the manifest files at ``path`` (a file or a folder),
    in file order; multi-document files give several, empty documents none."""
    docs: list[dict[str, Any]] = []
    for file in manifest_files(path):
        with file.open(encoding="utf-8") as stream:
            for doc in yaml.safe_load_all(stream):
                if doc is None:
                    continue
                if not isinstance(doc, dict):
                    raise ValueError(f"{file}: a YAML document that is not a mapping: {doc!r}")
                docs.append(doc)
    return docs


def granted(
    rbac_docs: Iterable[Mapping[str, Any]], kinds: Collection[str] = ROLE_KINDS
) -> set[Grant]:
    """The ``(apiGroup, resource, verb)`` triples that the ClusterRoles and Roles among
    ``rbac_docs`` grant (other documents are ignored), wildcards left as ``"*"``."""
    grants: set[Grant] = set()
    for doc in rbac_docs:
        is_rbac = str(doc.get("apiVersion", "")).startswith(RBAC_API)
        if not is_rbac or doc.get("kind") not in kinds:
            continue
        for rule in doc.get("rules") or []:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        grants.add((str(group), str(resource), str(verb)))
    return grants

"""One image, one uid: the Containerfile, deploy/kubernetes/ and docs/deploy.md agree.

The Containerfile's build command names the image (``-t localhost/ilucid:<version>``),
its version label and the tag are the project's version, and its user is uid and gid
10001; the Deployment runs that image as that uid (``runAsUser``, ``runAsGroup``,
``fsGroup``), kustomization.yaml pins the same name and tag, and both READMEs and
docs/deploy.md give the same build command and uid. A rename or a new uid in one place
and not the others fails here.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILE = REPO / "deploy" / "container" / "Containerfile"
KUBE = REPO / "deploy" / "kubernetes"
DEPLOY_DOC = REPO / "docs" / "deploy.md"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]["version"]
BUILD = re.compile(r"podman build -f deploy/container/Containerfile -t (\S+) \.")
#: the registry the docs push the image to, as an example of a site's
SITE_REGISTRY = "registry.example.org/hpc/"


def _containerfile() -> str:
    return CONTAINERFILE.read_text("utf-8")


def image_name() -> str:
    """The name the Containerfile's own build command gives the image."""
    names = set(BUILD.findall(_containerfile()))
    assert len(names) == 1, f"{CONTAINERFILE}: expected one build command, found {names}"
    return names.pop()


def image_uid() -> int:
    """The runtime stage's USER, checked against its useradd and groupadd."""
    text = _containerfile()
    users = re.findall(r"^USER (\d+):(\d+)$", text, re.M)
    assert len(users) == 1, f"{CONTAINERFILE}: expected one numeric USER uid:gid, found {users}"
    uid, gid = users[0]
    assert uid == gid, f"{CONTAINERFILE}: USER {uid}:{gid}: the gid is the uid"
    assert re.search(rf"useradd [^\n]*--uid {uid} --gid {gid}\b", text), "useradd's uid"
    assert re.search(rf"groupadd [^\n]*--gid {gid}\b", text), "groupadd's gid"
    assert re.search(rf"install -d -o {uid} -g {gid} -m 0700 /var/lib/ilucid\b", text)
    return int(uid)


def _deployment() -> dict[str, Any]:
    (doc,) = yaml.safe_load_all((KUBE / "deployment.yaml").read_text("utf-8"))
    assert doc["kind"] == "Deployment"
    return doc  # type: ignore[no-any-return]


def test_the_image_is_tagged_with_the_projects_version() -> None:
    name = image_name()
    assert name == f"localhost/ilucid:{VERSION}"
    assert f'org.opencontainers.image.version="{VERSION}"' in _containerfile()


def test_kubernetes_runs_the_image_the_containerfile_builds() -> None:
    pod = _deployment()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == image_name()
    repository, tag = image_name().rsplit(":", 1)
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text("utf-8"))
    assert kustomization["images"] == [{"name": repository, "newTag": tag}]
    assert _deployment()["metadata"]["labels"]["app.kubernetes.io/version"] == tag


def test_kubernetes_runs_it_as_the_images_uid() -> None:
    uid = image_uid()
    security = _deployment()["spec"]["template"]["spec"]["securityContext"]
    assert security["runAsNonRoot"] is True
    assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (uid,) * 3


def test_the_docs_give_the_same_build_command_and_uid() -> None:
    name, uid = image_name(), image_uid()
    for doc in (DEPLOY_DOC, KUBE / "README.md"):
        text = doc.read_text("utf-8")
        assert set(BUILD.findall(text)) == {name}, f"{doc}: build command"
        # every image name the text mentions is this one, or the example site's push of it
        pushed = SITE_REGISTRY + name.split("/", 1)[1]
        for mentioned in re.findall(r"\b[\w.-]+(?:/[\w.-]+)+:\d+\.\d+\.\d+\b", text):
            assert mentioned in (name, pushed), f"{doc}: {mentioned}"
        assert f"uid and gid {uid}" in text, f"{doc}: the image's uid"

"""A thin extension of kmock.KubernetesEmulator (kmock 0.8) that adds the API-server
semantics a scheduler backend / leader election needs and stock kmock lacks:

* metadata on create: uid, creationTimestamp, resourceVersion, generation,
  metadata.namespace from the URL, generateName, apiVersion/kind defaults;
* a global, monotonically increasing resourceVersion bumped on every write;
* PUT (replace) on named objects and subresources -> stock kmock answers 404;
* optimistic concurrency: 409 Conflict when a PUT/PATCH body carries a
  metadata.resourceVersion that differs from the stored one (exactly like
  the real API server; this is what Lease-based leader election relies on);
* PATCH by Content-Type: json-patch (RFC 6902), merge-patch (RFC 7386), and a
  *simplified* strategic-merge-patch (lists merged by a small table of merge keys);
* /status subresource semantics for resources that declare it (jobs, nodes, ...):
  main-resource writes keep the old .status, /status writes change only .status;
* labelSelector (=, ==, !=, in, notin, exists, !exists) and fieldSelector
  (=, ==, != on any dotted path, e.g. metadata.name, spec.nodeName) on LIST & WATCH;
* List kind/apiVersion/metadata.resourceVersion (watch: see ``kmock_watch``);
* DELETE bumps resourceVersion; 422 on create without name/generateName; a create is
  answered 201 Created (the client's typed custom-object create reads only a 201);
* a pod's log (``GET .../pods/NAME/log``): the text in ``pod_logs`` under (namespace,
  name), honouring ``tailLines`` and ``limitBytes`` (stock kmock answers the pod);
* schema checks: an object of a resource in ``validators`` that breaks its schema is
  refused with 422 Invalid on create, replace and patch (``kmock_schema``).

Everything else (request recording, reactions DSL, kmock.objects assertions)
is inherited unchanged.
"""

from __future__ import annotations

import copy
import datetime
import re
import secrets
import uuid
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
import kmock
from kmock._internal import dicts, enums, k8s, parsing, references, rendering

# Simplified strategic-merge-patch: list field name -> merge key ("" = set of primitives).
# Real SMP uses per-path patchMergeKey/patchStrategy from the OpenAPI schema; this table
# covers the common cases (conditions, containers, env, volumes, finalizers, ...).
SMP_MERGE_KEYS: dict[str, str] = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "finalizers": "",
    "ports": "containerPort",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}


class Conflict(k8s.KubernetesError):
    pass


# kmock 0.8 bug: parse_path() treats ANY "/namespaces" segment as the namespace prefix, so the
# cluster-scoped Namespace resource itself breaks: POST /api/v1/namespaces -> 500 ValueError, and
# GET /api/v1/namespaces/x is parsed as namespace='x', plural=None. Patch the module function
# (rendering.Request._parse calls it as parsing.parse_path, so patching the module attribute works).
_orig_parse_path = parsing.parse_path


def _parse_path(path: str) -> parsing.ParsedPath:
    parts = path.strip("/").split("/")
    base = 1 if parts[:1] == ["api"] else 2 if parts[:1] == ["apis"] else None
    if base is not None and len(parts) > base and parts[base + 1 : base + 2] == ["namespaces"]:
        rest = parts[base + 2 :]
        if (
            len(rest) == 0
            or (len(rest) == 1)
            or (len(rest) == 2 and rest[1] in ("status", "finalize"))
        ):
            group = "" if base == 1 else parts[1]
            version = parts[base]
            return parsing.ParsedPath(
                group=group,
                version=version,
                plural="namespaces",
                namespace=None,
                name=rest[0] if rest else None,
                subresource=rest[1] if len(rest) == 2 else None,
            )
    return _orig_parse_path(path)


def fix_namespace_parsing() -> None:
    """Process-global monkeypatch; installed by the first StatefulKubernetesEmulator."""
    parsing.parse_path = _parse_path


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _smp(base: Any, patch: Any, field: str | None = None) -> Any:
    """Apply a simplified strategic merge patch."""
    if isinstance(patch, dict):
        if patch.get("$patch") == "replace":
            return {k: v for k, v in patch.items() if k != "$patch"}
        if patch.get("$patch") == "delete":
            return None
        result = dict(base) if isinstance(base, dict) else {}
        for key, val in patch.items():
            if key.startswith("$"):
                continue
            if val is None:
                result.pop(key, None)
            else:
                merged = _smp(result.get(key), val, key)
                if merged is None:
                    result.pop(key, None)
                else:
                    result[key] = merged
        return result
    if isinstance(patch, list) and field in SMP_MERGE_KEYS and isinstance(base, list):
        key = SMP_MERGE_KEYS[field]
        if key == "":  # set of primitives (e.g. finalizers)
            return list(base) + [v for v in patch if v not in base]
        result = [copy.deepcopy(item) for item in base]
        for item in patch:
            if not isinstance(item, dict) or key not in item:
                result.append(item)
                continue
            idx = next(
                (
                    i
                    for i, b in enumerate(result)
                    if isinstance(b, dict) and b.get(key) == item[key]
                ),
                None,
            )
            if item.get("$patch") == "delete":
                if idx is not None:
                    del result[idx]
            elif idx is None:
                result.append({k: v for k, v in item.items() if not k.startswith("$")})
            else:
                result[idx] = _smp(result[idx], item)
        return result
    return copy.deepcopy(patch)


_LABEL_REQ = re.compile(
    r"^\s*(?P<neg>!)?(?P<key>[A-Za-z0-9_./-]+)\s*"
    r"(?:(?P<op>==|=|!=)\s*(?P<val>[A-Za-z0-9_.-]*)|\s+(?P<setop>in|notin)\s*\((?P<vals>[^)]*)\))?\s*$"
)


def _split_selector(sel: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in sel:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def match_labels(selector: str | None, labels: dict[str, str] | None) -> bool:
    if not selector:
        return True
    labels = labels or {}
    for req in _split_selector(selector):
        m = _LABEL_REQ.match(req)
        if not m:
            raise k8s.KubernetesError(
                status=400, reason="BadRequest", message=f"invalid label selector: {req!r}"
            )
        key = m["key"]
        if m["neg"]:
            ok = key not in labels
        elif m["op"] in ("=", "=="):
            ok = labels.get(key) == m["val"]
        elif m["op"] == "!=":
            ok = labels.get(key) != m["val"]
        elif m["setop"]:
            vals = {v.strip() for v in m["vals"].split(",") if v.strip()}
            ok = (labels.get(key) in vals) if m["setop"] == "in" else (labels.get(key) not in vals)
        else:
            ok = key in labels
        if not ok:
            return False
    return True


def match_fields(selector: str | None, obj: dict[str, Any]) -> bool:
    if not selector:
        return True
    for req in selector.split(","):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", req)
        if not m:
            raise k8s.KubernetesError(
                status=400, reason="BadRequest", message=f"invalid field selector: {req!r}"
            )
        path, op, val = m.groups()
        cur: Any = obj
        for part in path.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        cur = "" if cur is None else str(cur).lower() if isinstance(cur, bool) else str(cur)
        if (cur == val) != (op != "!="):
            return False
    return True


@attrs.define(kw_only=True)
class StatefulKubernetesEmulator(kmock.KubernetesEmulator):
    _rv: int = attrs.field(default=1000, init=False)
    #: each pod's log, by (namespace, name): what ``GET .../pods/NAME/log`` answers
    pod_logs: dict[tuple[str, str], bytes] = attrs.field(factory=dict)
    #: (group, plural) -> check(new, stored or None) -> what breaks the schema, or None
    validators: dict[tuple[str, str], Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        fix_namespace_parsing()
        self.resources.load_bundled()  # discovery + kinds + which resources have /status
        # kubernetes.client.VersionApi().get_code() requests '/version/' (trailing slash).
        self.fallback["get /version/"] << self._serve_server_version
        self.fallback[enums.method.PUT] << self._serve_update  # stock kmock has no PUT at all

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _info(self, resource: references.resource) -> references.ResourceInfo | None:
        return self.resources[resource] if resource in self.resources else None  # noqa: SIM401

    def _validate(
        self, resource: references.resource, new: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        """422 Invalid, naming the field, when ``new`` breaks its resource's schema."""
        check = self.validators.get((resource.group or "", resource.plural or ""))
        wrong = check(new, old) if check is not None else None
        if wrong is not None:
            name = (new.get("metadata") or {}).get("name")
            raise k8s.KubernetesError(
                status=422,
                reason="Invalid",
                message=f'{new.get("kind") or resource.plural} "{name}" is invalid: {wrong}',
            )

    def _has_status(self, resource: references.resource) -> bool:
        info = self._info(resource)
        return bool(info and "status" in info.subresources)

    # ---------------------------------------------------------------- writes
    def _pod_log(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        """A pod's log as the API server sends it: plain text, its last ``tailLines``
        lines, at most ``limitBytes`` bytes (from the start of what is sent)."""
        key = (str(request.namespace), str(request.name))
        if key not in self.pod_logs:
            raise k8s.KubernetesError(status=404, reason="NotFound", message=f"pod {key[1]}")
        data = self.pod_logs[key]
        tail = request.params.get("tailLines")
        if tail is not None:
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[-int(tail) :]) if int(tail) else b""
        limit = request.params.get("limitBytes")
        if limit is not None:
            data = data[: int(limit)]
        return aiohttp.web.Response(body=data, content_type="text/plain")

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        res = request.resource
        if (
            res is not None
            and res.plural == "pods"
            and request.subresource == "log"
            and request.method == enums.method.GET
        ):
            return self._pod_log(request)
        if (
            res is not None
            and request.method == enums.method.POST
            and request.action == enums.action.CREATE
        ):
            self._prepare_create(request)
            response = await super()._handle(request)
            if response.status == 200:  # the API server answers a create with 201 Created
                response.set_status(201)
            return response
        elif (
            res is not None
            and request.name is not None
            and request.method in (enums.method.PUT, enums.method.PATCH)
        ):
            # Skip the parent's unconditional merge-on-PATCH; go straight to the reaction DSL
            # (RawHandler._handle): user reactions win (and then NOTHING is mutated, handy for
            # fault injection), otherwise the fallback self._serve_update() below does the work.
            return await kmock.KubernetesScaffold._handle(self, request)
        elif res is not None and request.action == enums.action.DELETE and request.name is not None:
            key = (res, request.namespace, request.name)
            if key in self._objects and not self._objects[key].deleted:
                self._objects[key].last.raw["metadata"]["resourceVersion"] = (
                    self._next_rv()
                )  # .raw shares nested dicts
        return await super()._handle(request)

    def _prepare_create(self, request: rendering.Request) -> None:
        body = request.data
        if not isinstance(body, dict):
            raise k8s.KubernetesError(
                status=400, reason="BadRequest", message="body must be a JSON object"
            )
        meta = body.setdefault("metadata", {})
        if request.namespace and not meta.get("namespace"):
            meta["namespace"] = request.namespace
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
            else:
                raise k8s.KubernetesError(
                    status=422,
                    reason="Invalid",
                    message="metadata.name or metadata.generateName is required",
                )
        info = self._info(request.resource)
        gv = (
            request.resource.version
            if not request.resource.group
            else f"{request.resource.group}/{request.resource.version}"
        )
        body.setdefault("apiVersion", gv)
        if info and info.kind:
            body.setdefault("kind", info.kind)
        meta.pop(
            "resourceVersion", None
        )  # the server assigns it; clients must not send it on create
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        meta["resourceVersion"] = self._next_rv()
        meta["generation"] = 1
        self._validate(request.resource, body, None)

    # Registered by the parent as the fallback for action.UPDATE (PATCH); we add it for PUT too.
    async def _serve_update(self, request: rendering.Request) -> rendering.Payload:
        res = request.resource
        if res is None or request.name is None or request.subresource not in (None, "status"):
            raise k8s.KubernetesEndpointNotFoundError()
        key = (res, request.namespace, request.name)
        async with self._lock:
            if key not in self._objects or self._objects[key].deleted:
                raise k8s.KubernetesObjectNotFoundError()
            old = copy.deepcopy(self._objects[key].raw)
            ctype = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            body = request.data

            if request.method == enums.method.PUT:
                if not isinstance(body, dict):
                    raise k8s.KubernetesError(
                        status=400, reason="BadRequest", message="body must be an object"
                    )
                new = copy.deepcopy(body)
                sent_rv = (body.get("metadata") or {}).get("resourceVersion")
            elif ctype == "application/json-patch+json":
                try:
                    new = jsonpatch.apply_patch(old, body, in_place=False)
                except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
                    raise k8s.KubernetesError(status=422, reason="Invalid", message=str(e)) from e
                sent_rv = (
                    new.get("metadata", {}).get("resourceVersion")
                    if new.get("metadata", {}).get("resourceVersion")
                    != old["metadata"].get("resourceVersion")
                    else None
                )
            elif ctype == "application/merge-patch+json":
                new = dict(dicts.merge_patch_dict(old, body))
                sent_rv = (body.get("metadata") or {}).get("resourceVersion")
            elif ctype == "application/strategic-merge-patch+json":
                new = _smp(old, body)
                sent_rv = (body.get("metadata") or {}).get("resourceVersion")
            else:
                raise k8s.KubernetesError(
                    status=415,
                    reason="UnsupportedMediaType",
                    message=f"unsupported patch content type {ctype!r}",
                )

            # Optimistic concurrency (same rule as kube-apiserver: only if the client sent an RV).
            cur_rv = old["metadata"].get("resourceVersion")
            if sent_rv not in (None, "") and str(sent_rv) != cur_rv:
                raise Conflict(
                    status=409,
                    reason="Conflict",
                    details={"name": request.name, "group": res.group, "kind": res.plural},
                    message=(
                        f"Operation cannot be fulfilled on {res.plural}"
                        f'{"." + res.group if res.group else ""} "{request.name}": '
                        "the object has been modified; please apply your changes to the"
                        " latest version and try again"
                    ),
                )

            # Immutable identity.
            new.setdefault("metadata", {})
            for f in ("name", "namespace", "uid", "creationTimestamp"):
                if f in old["metadata"]:
                    new["metadata"][f] = old["metadata"][f]
            new.setdefault("apiVersion", old.get("apiVersion"))
            new.setdefault("kind", old.get("kind"))

            # Status subresource semantics.
            if self._has_status(res):
                if request.subresource == "status":
                    new = {
                        **{k: v for k, v in old.items() if k != "status"},
                        **({"status": new["status"]} if "status" in new else {}),
                    }
                elif "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)

            def strip(o: dict[str, Any]) -> dict[str, Any]:
                return {k: v for k, v in o.items() if k not in ("metadata", "status")}

            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + (
                strip(new) != strip(old)
            )
            new["metadata"]["resourceVersion"] = self._next_rv()
            self._validate(res, new, old)

            self._objects[key].history.append(new)
            await self._buses[res].put({"type": "MODIFIED", "object": new})
            return copy.deepcopy(new)

    # ---------------------------------------------------------------- reads
    def _select(self, request: rendering.Request) -> list[dict[str, Any]]:
        lsel, fsel = request.params.get("labelSelector"), request.params.get("fieldSelector")
        out = []
        for (res, ns, _), obj in self._objects.items():
            if res != request.resource or obj.deleted:
                continue
            if request.namespace is not None and ns != request.namespace:
                continue
            raw = obj.raw
            if match_labels(lsel, raw.get("metadata", {}).get("labels")) and match_fields(
                fsel, raw
            ):
                out.append(copy.deepcopy(raw))
        return out

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        if request.resource not in self._get_resources():
            raise k8s.KubernetesResourceNotFoundError()
        async with self._lock:
            items = self._select(request)
        info = self._info(request.resource)
        res = request.resource
        return {
            "apiVersion": res.version if not res.group else f"{res.group}/{res.version}",
            "kind": f"{info.kind}List" if info and info.kind else "List",
            "metadata": {"resourceVersion": str(self._rv)},
            "items": items,
        }

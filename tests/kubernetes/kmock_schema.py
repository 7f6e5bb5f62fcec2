"""What the emulated API server checks of an object before it stores it, as a real one
does with a resource's OpenAPI schema: a write that breaks it is answered 422 Invalid,
naming the field.

* ProvisioningRequest (``autoscaling.x-k8s.io/v1``): the CRD's own ``openAPIV3Schema``
  (``schemas/provisioningrequest-v1.json``, transcribed from cluster-autoscaler's CRD),
  strict: a field the schema does not declare is refused (a real server prunes it
  silently, which would hide a misspelt field from the tests); its CEL rules
  ``self == oldSelf`` make ``spec``'s fields immutable; ``status.conditions`` is a
  list-map keyed by ``type`` (one condition a type).
* PodTemplate (core ``v1``): Kubernetes' own schema, as kubernetes-validate bundles it
  (strict, the version test_manifests.py checks the manifests against).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate

__all__ = ["PROVISIONING_SCHEMA", "VALIDATORS", "check_provisioning_request"]

SCHEMA_FILE = Path(__file__).resolve().parent / "schemas" / "provisioningrequest-v1.json"
KUBERNETES_VERSION = "1.30"

#: (group, plural) -> check(new object, stored object or None) -> what is wrong, or None
Check = Callable[[Mapping[str, Any], Mapping[str, Any] | None], str | None]


def _strict(schema: Any) -> Any:
    """Every object schema that lists its properties refuses any other."""
    if isinstance(schema, dict):
        strict = {key: _strict(value) for key, value in schema.items()}
        if "properties" in strict and "additionalProperties" not in strict:
            strict["additionalProperties"] = False
        return strict
    if isinstance(schema, list):
        return [_strict(value) for value in schema]
    return schema


_LOADED = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
PROVISIONING_SCHEMA: dict[str, Any] = _strict(_LOADED["openAPIV3Schema"])
_IMMUTABLE: list[list[str]] = _LOADED["immutable"]
_VALIDATOR = jsonschema.Draft7Validator(
    PROVISIONING_SCHEMA, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
)


def _field(path: Any) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else f".{step}" if text else str(step)
    return text or "(the object)"


def _dig(obj: Any, path: list[str]) -> Any:
    for step in path:
        obj = obj.get(step) if isinstance(obj, Mapping) else None
    return obj


def check_provisioning_request(
    new: Mapping[str, Any], old: Mapping[str, Any] | None = None
) -> str | None:
    """What is wrong with ``new`` (replacing ``old``) under the CRD's schema, or None."""
    for error in sorted(_VALIDATOR.iter_errors(new), key=lambda e: list(e.absolute_path)):
        return f"{_field(error.absolute_path)}: {error.message}"
    types = [c.get("type") for c in _dig(new, ["status", "conditions"]) or []]
    if len(types) != len(set(types)):
        return f"status.conditions: a type twice (a list-map keyed by type): {types}"
    if old is not None:
        for path in _IMMUTABLE:
            if _dig(new, path) != _dig(old, path):
                return f"{'.'.join(path)}: Value is immutable"
    return None


def check_pod_template(new: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> str | None:
    try:
        kubernetes_validate.validate(dict(new), KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return f"{_field(exc.absolute_path)}: {exc.message}"
    return None


VALIDATORS: dict[tuple[str, str], Check] = {
    ("autoscaling.x-k8s.io", "provisioningrequests"): check_provisioning_request,
    ("", "podtemplates"): check_pod_template,
}

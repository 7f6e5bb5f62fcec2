"""Paid pools and tenants' cloud budgets, from the same ``--tiers`` file as the quotas.

A site that bursts to the cloud says so beside its quotas (docs/hybrid.md)::

    value_of_wait = 10          # what an hour of waiting is worth per GPU

    [pools.cloud]               # nodes labelled pool=cloud (Slurm: Feature=pool_cloud)
    price_per_gpu_hour = 2.5
    startup_s = 300             # power-up until a job makes progress
    idle_release_s = 600        # release a node idle this long (never under a job)
    max_nodes = 16              # at most this many up at once (optional)

    [tenants.vision]
    budget = 5000               # per calendar month, in the price's currency
    budget_gpu_hours = 2000     # and/or in GPU-hours
    value_of_wait = 20          # the tenant's own (optional)
    cloud = false               # keep the tenant on-prem

Every error names the file, the line and the field at fault.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ilucid.core import PoolSpec
from ilucid.core.cloud import CloudBudget
from ilucid.settings.tier_settings import TierSettingsError, read_toml

__all__ = ["CLOUD_TENANT_KEYS", "CLOUD_TOP_KEYS", "CloudSettings", "load_cloud_settings"]

#: the keys of a tiers file this module reads (the quota reader leaves them to it)
CLOUD_TOP_KEYS = frozenset({"pools", "value_of_wait"})
CLOUD_TENANT_KEYS = frozenset({"budget", "budget_gpu_hours", "value_of_wait", "cloud"})
_POOL_KEYS = {
    "price_per_gpu_hour": float,
    "startup_s": float,
    "idle_release_s": float,
    "max_nodes": int,
    "on_demand": bool,
}
_BUDGET_FIELDS = {
    "budget": ("limit", float),
    "budget_gpu_hours": ("gpu_hours", float),
    "value_of_wait": ("value_of_wait", float),
    "cloud": ("cloud", bool),
}


@dataclass(frozen=True, slots=True)
class CloudSettings:
    pools: dict[str, PoolSpec] = field(default_factory=dict)
    value_of_wait: float | None = None
    budgets: dict[str, CloudBudget] = field(default_factory=dict)


def load_cloud_settings(path: Path) -> CloudSettings:
    """The paid pools, the site's value of waiting and the tenants' budgets in ``path``."""
    text, data = read_toml(path, TierSettingsError)
    where = _Where(path, text)
    value = data.get("value_of_wait")
    if value is not None:
        value = _number(where, None, "value_of_wait", value)
    pools: dict[str, PoolSpec] = {}
    table = data.get("pools", {})
    if not isinstance(table, dict):
        raise where.error(None, "pools", "must be a table of pools ([pools.NAME])")
    for name, entry in table.items():
        pools[name] = _pool(where, name, entry)
    budgets: dict[str, CloudBudget] = {}
    tenants = data.get("tenants", {})
    if isinstance(tenants, dict):
        for tenant, entry in tenants.items():
            if isinstance(entry, dict) and CLOUD_TENANT_KEYS & set(entry):
                budgets[tenant] = _budget(where, tenant, entry)
    if (value is not None or budgets) and not pools:
        raise where.error(None, "pools", "value_of_wait and budgets need a [pools.NAME] table")
    return CloudSettings(pools, value, budgets)


class _Where:
    """Errors ``FILE:LINE: FIELD: message``, the line found from the field's dotted name
    (``pools.cloud.startup_s``: key ``startup_s`` under ``[pools.cloud]``)."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def line_of(self, field: str) -> int | None:
        *head, key = field.split(".")
        wanted = ".".join(head) or None
        section: str | None = None
        header = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]")
        for number, line in enumerate(self.lines, start=1):
            match = header.match(line)
            if match:
                section = match.group(1).replace('"', "").replace(" ", "")
                if section == field:
                    return number
                continue
            if section == wanted and re.match(rf"^\s*{re.escape(key)}\s*=", line):
                return number
        return None

    def error(self, _tenant: None, field: str, message: str) -> TierSettingsError:
        line = self.line_of(field)
        at = f"{self.path}:{line}" if line is not None else str(self.path)
        return TierSettingsError(f"{at}: {field}: {message}")


def _pool(where: Any, name: str, entry: object) -> PoolSpec:
    if not isinstance(entry, dict):
        raise where.error(None, f"pools.{name}", "must be a table ([pools.NAME])")
    values: dict[str, Any] = {}
    for key, raw in entry.items():
        kind = _POOL_KEYS.get(key)
        if kind is None:
            known = ", ".join(_POOL_KEYS)
            raise where.error(None, f"pools.{name}.{key}", f"unknown pool setting; known: {known}")
        values[key] = _typed(where, f"pools.{name}.{key}", raw, kind)
    if "price_per_gpu_hour" not in values:
        raise where.error(None, f"pools.{name}", "needs price_per_gpu_hour (0 for a free pool)")
    try:
        return PoolSpec(
            name,
            values["price_per_gpu_hour"],
            values.get("startup_s", 0.0),
            on_demand=values.get("on_demand", True),
            idle_release_s=values.get("idle_release_s", 600.0),
            max_nodes=values.get("max_nodes"),
        )
    except ValueError as exc:
        raise where.error(None, f"pools.{name}", str(exc)) from None


def _budget(where: Any, tenant: str, entry: dict[str, Any]) -> CloudBudget:
    values: dict[str, Any] = {}
    for key, raw in entry.items():
        if key in _BUDGET_FIELDS:
            name, kind = _BUDGET_FIELDS[key]
            values[name] = _typed(where, f"tenants.{tenant}.{key}", raw, kind)
    try:
        return CloudBudget(**values)
    except ValueError as exc:
        raise where.error(None, f"tenants.{tenant}", str(exc)) from None


def _number(where: Any, tenant: str | None, key: str, raw: object) -> float:
    return float(_typed(where, key if tenant is None else f"tenants.{tenant}.{key}", raw, float))


def _typed(where: Any, key: str, raw: object, kind: type) -> Any:
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        raise where.error(None, key, f"must be true or false, got {raw!r}")
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise where.error(None, key, f"must be a number, got {raw!r}")
    if kind is int and not isinstance(raw, int):
        raise where.error(None, key, f"must be a whole number, got {raw!r}")
    if not raw >= 0 or raw == float("inf"):
        raise where.error(None, key, f"must be a finite number >= 0, got {raw!r}")
    return kind(raw)

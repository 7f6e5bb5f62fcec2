"""The ``tiered`` policy's settings from a TOML file: the training reserve and tenant quotas.

Operators keep team quotas in a file under review rather than in code; the
same file drives the live service (``ilucid serve --tiers``) and what-if
replays (``ilucid mixed --tiers``), so a replay judges the quotas a site runs.
An example::

    reserve_training = 0.2     # share of GPUs inference may never take
    starve_after_s = 86400     # a job waiting this long gets nodes drained for it
    preemption_limit = 10      # spare jobs already preempted this many times

    [tenants.vision]
    guaranteed = 64            # GPUs it gets back by preemption when it asks
    borrow_limit = 16          # idle GPUs it may borrow beyond that
    weight = 2                 # fair-share weight

Every error names the file, the line and the field at fault.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from ilucid.core.policies.tiered import TierConfig
from ilucid.core.quota import TenantQuota

__all__ = ["TierSettingsError", "load_tier_config", "read_toml"]

#: top-level keys a file may set (the TierConfig fields an operator may tune)
_TOP = {
    "reserve_training": float,
    "starve_after_s": float,
    "aging": float,
    "drain_depth": int,
    "drain_renewals": int,
    "preemption_limit": int,
    "inference_preempts": bool,
}
_TENANT = {"guaranteed": int, "borrow_limit": int, "weight": float}
#: read by :mod:`ilucid.settings.cloud_settings` from the same file (paid pools, budgets)
_CLOUD_TOP = frozenset({"pools", "value_of_wait"})
_CLOUD_TENANT = frozenset({"budget", "budget_gpu_hours", "value_of_wait", "cloud"})
assert set(_TOP) <= {f.name for f in fields(TierConfig)}


class TierSettingsError(ValueError):
    """A settings file that cannot be used, with where and why."""


def read_toml(path: Path, error: type[ValueError]) -> tuple[str, dict[str, Any]]:
    """A settings file's text and table; unreadable or malformed ones raise ``error``
    naming the file (and the line, where TOML's parser knows it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: {exc}") from None


def load_tier_config(path: Path) -> TierConfig:
    """Read ``path`` into a :class:`TierConfig`; unknown keys are errors, not ignored."""
    text, data = read_toml(path, TierSettingsError)
    where = _Locator(path, text)
    top: dict[str, Any] = {}
    tenants: dict[str, TenantQuota] = {}
    for key, value in data.items():
        if key == "tenants":
            if not isinstance(value, dict):
                raise where.error(None, key, "must be a table of tenants ([tenants.NAME])")
            for name, table in value.items():
                tenants[name] = _tenant(where, name, table)
            continue
        if key in _CLOUD_TOP:
            continue
        if key not in _TOP:
            known = ", ".join([*_TOP, "tenants", *sorted(_CLOUD_TOP)])
            raise where.error(None, key, f"unknown setting; known: {known}")
        top[key] = _typed(where, None, key, value, _TOP[key])
    try:
        return TierConfig(quotas=tenants, **top)
    except ValueError as exc:
        field = next((k for k in top if k in str(exc)), None)
        raise where.error(None, field or "?", str(exc)) from None


def _tenant(where: _Locator, name: str, table: object) -> TenantQuota:
    if not isinstance(table, dict):
        raise where.error(None, f"tenants.{name}", "must be a table ([tenants.NAME])")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key in _CLOUD_TENANT:
            continue
        if key not in _TENANT:
            known = ", ".join([*_TENANT, *sorted(_CLOUD_TENANT)])
            raise where.error(name, key, f"unknown tenant setting; known: {known}")
        values[key] = _typed(where, name, key, value, _TENANT[key])
    try:
        return TenantQuota(**values)
    except ValueError as exc:
        field = next((k for k in values if k in str(exc)), "?")
        raise where.error(name, field, str(exc)) from None


def _typed(where: _Locator, tenant: str | None, key: str, value: object, kind: type) -> object:
    # TOML has distinct ints, floats and booleans, but bool is an int in Python
    if isinstance(value, bool) == (kind is bool):
        if kind is bool or (kind is int and isinstance(value, int)):
            return value
        if kind is float and isinstance(value, (int, float)):
            return float(value)
    names = {bool: "true or false", int: "a whole number", float: "a number"}
    raise where.error(tenant, key, f"must be {names[kind]}, got {value!r}")


class _Locator:
    """Finds the line of a key for error messages (tomllib reports lines only for syntax)."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def line_of(self, tenant: str | None, key: str) -> int | None:
        section: str | None = None
        header = re.compile(r"^\s*\[\s*tenants\.\"?([^\]\"]+)\"?\s*\]")
        for number, line in enumerate(self.lines, start=1):
            match = header.match(line)
            if match:
                section = match.group(1).strip()
                continue
            if line.lstrip().startswith("["):
                section = "?"
                continue
            if section == tenant and re.match(rf"^\s*{re.escape(key)}\s*=", line):
                return number
        return None

    def error(self, tenant: str | None, key: str, message: str) -> TierSettingsError:
        line = self.line_of(tenant, key)
        at = f"{self.path}:{line}" if line is not None else str(self.path)
        field = key if tenant is None else f"tenants.{tenant}.{key}"
        return TierSettingsError(f"{at}: {field}: {message}")

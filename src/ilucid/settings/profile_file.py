"""A site's own scheduling profile, written in TOML and registered under its own name.

Two kinds of file. One tunes the default profile (``base = "ilucid"``)::

    [profile]
    name = "long-jobs"
    summary = "the default, with a 12 h starvation bound"
    [settings]                 # any DefaultConfig field
    starve_after_s = 43200
    levels = [3600, 36000]
    profile_limit_s = false    # an optional setting: false turns it off
    [settings.quotas.vision]   # tenant quotas, as in a --tiers file
    guaranteed = 64

The other orders training by the site's own rule (``base = "rule"``)::

    [profile]
    name = "my-site"
    base = "rule"
    [queue_order]
    rule = "estimate * gpus / (1 + waited / 3600)"
    # entry_point = "name"     # or a function an installed package registers
    reserve_training = 0.2

A rule is parsed by :mod:`ilucid.core.rules` (never ``eval``); an entry point is
a function in the group ``ilucid.priority_rules`` taking the job's fields (a
mapping of numbers) and returning its priority (lower runs first). Unknown keys
and sections are errors, not ignored, and every error is one line
``FILE:LINE: FIELD: message``. See docs/profiles.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from ilucid.core.arg_reader import NoArgs
from ilucid.core.framework import Needs, Phase, PluginRef, PluginSpec, Profile, register
from ilucid.core.policies import PROFILES, default_plugins, register_profile
from ilucid.core.policies.default import DefaultConfig
from ilucid.core.policies.rule import FunctionOrder
from ilucid.core.quota import TenantQuota
from ilucid.core.rules import PriorityRule, RuleError
from ilucid.settings.plugin_profile import plugin_list_profile
from ilucid.settings.profile_locator import Locator as _Locator
from ilucid.settings.tier_settings import read_toml

__all__ = [
    "ENTRY_POINT_GROUP",
    "ProfileFileError",
    "is_profile_file",
    "load_profile",
    "resolve_policies",
    "resolve_policy",
]

#: the entry-point group a package registers its priority functions under
ENTRY_POINT_GROUP = "ilucid.priority_rules"
BASES = ("ilucid", "rule")

_NUMBERS = "numbers"  # an array of numbers (``levels``)
_PROFILE_KEYS: Mapping[str, Any] = {"name": str, "base": str, "summary": str}
#: the DefaultConfig fields a [settings] table may set, and their TOML types. Written
#: out, not read off the field annotations (a compiled core keeps no annotation text);
#: a test checks it names every field, so the list follows the config as it grows
_SETTINGS: Mapping[str, Any] = {
    "levels": _NUMBERS,
    "starve_after_s": float,
    "rewait_after_s": float,
    "guard_slice_s": float,
    "reserve_training": float,
    "quotas": dict,
    "preemption_limit": int,
    "lead_per_error": float,
    "error_window": int,
    "replan_interval_s": float,
    "profile_limit_s": float,
    "profile_max_gpus": int,
    "profile_probe": int,
    "pack_scan": int,
    "assume_gpu_memory_gb": float,
}
_TENANT: Mapping[str, Any] = {"guaranteed": int, "borrow_limit": int, "weight": float}
_QUEUE_ORDER: Mapping[str, Any] = {"rule": str, "entry_point": str, "reserve_training": float}
_SECTIONS = ("profile", "settings", "queue_order", "plugin")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: of those, the ones ``false`` turns off (their fields are ``X | None``)
_OPTIONAL = frozenset({"profile_limit_s", "preemption_limit"})

Q, INFERENCE, PL = Phase.QUEUE_ORDER, Phase.INFERENCE, Phase.PLAN


class ProfileFileError(ValueError):
    """A profile file that cannot be used: ``FILE:LINE: FIELD: message``."""


def is_profile_file(name: str) -> bool:
    """Whether a ``--policy`` item names a profile file rather than a registered profile."""
    return name.lower().endswith(".toml")


def load_profile(path: Path | str) -> Profile:
    """Read a profile file into a registry entry (not registered: see :func:`resolve_policy`)."""
    path = Path(path)
    text, data = read_toml(path, ProfileFileError)
    where = _Locator(path, text, ProfileFileError)
    for key, value in data.items():
        if key not in _SECTIONS:
            raise where.error("", key, f"unknown section; known: {', '.join(_SECTIONS)}")
        if key == "plugin" and isinstance(value, list):
            continue
        if not isinstance(value, dict):
            raise where.error("", key, f"must be a table ([{key}])")
    head = data.get("profile")
    if head is None:
        raise where.error("", "profile", 'missing the [profile] table (name = "...")')
    head = _check_keys(where, "profile", head, _PROFILE_KEYS)
    name = head.get("name")
    if name is None:
        raise where.error("profile", "name", 'missing; name = "..." is what outputs show')
    if not _NAME.match(name) or is_profile_file(name):
        raise where.error(
            "profile",
            "name",
            f"{name!r} is not a profile name: letters, digits, '.', '_' and '-',"
            " not ending in .toml",
        )
    if name in PROFILES:
        raise where.error(
            "profile",
            "name",
            f"{name!r} is already a registered profile; give this profile a new name",
        )
    if "plugin" in data:
        if "base" in head or "settings" in data or "queue_order" in data:
            raise where.error(
                "",
                "plugin",
                "a profile with [[plugin]] tables lists all its plugins: no base,"
                " [settings] or [queue_order]",
            )
        return plugin_list_profile(where, path, name, head.get("summary"), data["plugin"])
    base = head.get("base", "ilucid")
    if base not in BASES:
        raise where.error("profile", "base", f"must be one of {', '.join(BASES)}, got {base!r}")
    summary = head.get("summary")
    if base == "ilucid":
        if "queue_order" in data:
            raise where.error(
                "",
                "queue_order",
                'only a profile with base = "rule" has a queue order;'
                ' base "ilucid" is tuned in [settings]',
            )
        return _settings_profile(where, name, summary, data.get("settings", {}))
    if "settings" in data:
        raise where.error(
            "",
            "settings",
            'a profile with base = "rule" has no [settings]; put reserve_training in [queue_order]',
        )
    if "queue_order" not in data:
        raise where.error(
            "",
            "queue_order",
            'base = "rule" needs a [queue_order] table with rule = "..." or entry_point = "..."',
        )
    return _rule_profile(where, name, summary, data["queue_order"])


def resolve_policy(name: str, _loaded: dict[Path, str] | None = None) -> str:
    """``name`` itself, or for a ``*.toml`` path: load it, register it, return its name.

    Call it before the simulator forks its workers (they inherit the registry).
    The same file given twice in one call of :func:`resolve_policies` is read once.
    """
    if not is_profile_file(name):
        return name
    path = Path(name)
    key = path.resolve()
    if _loaded is not None and key in _loaded:
        return _loaded[key]
    profile = load_profile(path)
    try:
        register_profile(profile)
    except ValueError as exc:  # a plugin refused its arguments, or the plan its parts
        raise ProfileFileError(f"{path}: {exc}") from None
    if _loaded is not None:
        _loaded[key] = profile.name
    return profile.name


def resolve_policies(names: Iterable[str]) -> list[str]:
    """:func:`resolve_policy` for each of ``names`` (``--policy fifo,my_site.toml``)."""
    loaded: dict[Path, str] = {}
    return [resolve_policy(n, loaded) for n in names]


# -- base = "ilucid": the default profile with the site's settings ----------------------
def _settings_profile(
    where: _Locator, name: str, summary: str | None, table: Mapping[str, Any]
) -> Profile:
    values: dict[str, Any] = {}
    for key, value in _check_keys(where, "settings", table, _SETTINGS).items():
        if value is None:  # ``false``: off
            values[key] = None
        elif key == "quotas":
            values[key] = {tenant: _tenant(where, tenant, quota) for tenant, quota in value.items()}
        elif key == "levels":
            values[key] = tuple(value)
        else:
            values[key] = value
    try:
        config = DefaultConfig(**values)
    except ValueError as exc:
        field = next((k for k in values if str(exc).startswith(k)), None)
        field = field or next((k for k in values if k in str(exc)), None)
        raise where.error("settings", field, str(exc)) from None
    if summary is None:
        shown = ", ".join(
            f"{k}={'off' if v is None else _shown(v)}" for k, v in values.items() if k != "quotas"
        )
        if values.get("quotas"):
            shown = ", ".join(filter(None, [shown, f"quotas for {', '.join(values['quotas'])}"]))
        summary = "the default profile" + (f" with {shown}" if shown else "")

    needs = Needs(estimates=True, profiler=config.profile_limit_s is not None)
    return Profile(name, summary, default_plugins(config), needs)


def _tenant(where: _Locator, tenant: str, table: object) -> TenantQuota:
    section = f"settings.quotas.{tenant}"
    if not isinstance(table, dict):
        raise where.error("settings.quotas", tenant, f"must be a table ([{section}])")
    values = _check_keys(where, section, table, _TENANT)
    try:
        return TenantQuota(**values)
    except ValueError as exc:
        field = next((k for k in values if k in str(exc)), None)
        raise where.error(
            section if field else "settings.quotas", field or tenant, str(exc)
        ) from None


# -- base = "rule": inference first, then training by the site's own order --------------
def _rule_profile(
    where: _Locator, name: str, summary: str | None, table: Mapping[str, Any]
) -> Profile:
    section = "queue_order"
    values = _check_keys(where, section, table, _QUEUE_ORDER)
    reserve = values.get("reserve_training", 0.2)
    if not 0.0 <= reserve < 1.0:
        raise where.error(section, "reserve_training", f"must be in [0, 1), got {reserve}")
    has_rule, has_entry = "rule" in values, "entry_point" in values
    if has_rule == has_entry:
        raise where.error(
            "" if not has_rule else section,
            section if not has_rule else "entry_point",
            'give exactly one of rule = "..." and entry_point = "..."',
        )
    if has_rule:
        try:
            rule = PriorityRule.parse(values["rule"])
        except RuleError as exc:
            raise where.error(section, "rule", str(exc)) from None
        order = PluginRef(Q, "rule", {"rule": rule.text})
        shown = f"rule `{rule.text}`"
    else:
        entry_point = values["entry_point"]
        function = _entry_point(where, entry_point)
        order = PluginRef(Q, _function_order(entry_point, function))
        shown = f"entry point `{entry_point}` ({ENTRY_POINT_GROUP})"
    if summary is None:
        summary = (
            f"inference first with a {reserve:.0%} training reserve; training by {shown},"
            " lowest first, ranked afresh every pass; not preemptive"
        )
    plugins = (
        PluginRef(INFERENCE, "inference-first", {"reserve": reserve}),
        order,
        PluginRef(PL, "in-order"),
    )
    return Profile(name, summary, plugins, Needs(estimates=True))


def _function_order(entry_point: str, function: Callable[[Mapping[str, float]], float]) -> str:
    """Register the priority function as a queue-order plugin; its registry name."""
    name = f"{ENTRY_POINT_GROUP}:{entry_point}"
    order = FunctionOrder(function, f"entry point `{entry_point}`")
    register(
        PluginSpec(
            name,
            Q,
            f"priority function {entry_point} ({ENTRY_POINT_GROUP})",
            NoArgs.decode,
            lambda _args, _context, _parts: order,
        )
    )
    return name


def _entry_point(where: _Locator, name: str) -> Callable[[Mapping[str, float]], float]:
    found = [e for e in metadata.entry_points(group=ENTRY_POINT_GROUP) if e.name == name]
    if not found:
        installed = sorted({e.name for e in metadata.entry_points(group=ENTRY_POINT_GROUP)})
        raise where.error(
            "queue_order",
            "entry_point",
            f"no entry point {name!r} in the group {ENTRY_POINT_GROUP};"
            f" installed: {', '.join(installed) or 'none'}",
        )
    try:
        function = found[0].load()
    except Exception as exc:  # an installed package's import failed: say how
        raise where.error(
            "queue_order",
            "entry_point",
            f"{name!r} ({found[0].value}) cannot be loaded: {type(exc).__name__}: {exc}",
        ) from None
    if not callable(function):
        raise where.error(
            "queue_order",
            "entry_point",
            f"{name!r} ({found[0].value}) is not a function of the job's fields",
        )
    return function  # type: ignore[no-any-return]


# -- checking values -------------------------------------------------------------------
def _check_keys(
    where: _Locator, section: str, table: Mapping[str, Any], kinds: Mapping[str, Any]
) -> dict[str, Any]:
    """The table's values, typed; an unknown key or a wrong type stops here."""
    checked: dict[str, Any] = {}
    for key, value in table.items():
        if key not in kinds:
            raise where.error(section, key, f"unknown key; known: {', '.join(kinds)}")
        checked[key] = _typed(where, section, key, value, kinds[key])
    return checked


def _typed(where: _Locator, section: str, key: str, value: object, kind: Any) -> object:
    # TOML has distinct ints, floats and booleans, but bool is an int in Python
    if value is False and section == "settings" and key in _OPTIONAL:
        return None
    if kind is _NUMBERS:
        if isinstance(value, list) and all(_is_number(v) for v in value):
            return [float(v) for v in value]
        raise where.error(section, key, f"must be an array of numbers, got {value!r}")
    if kind is dict:
        if isinstance(value, dict):
            return value
        raise where.error(section, key, f"must be a table ([{section}.{key}.NAME])")
    if kind is str and isinstance(value, str):
        return value
    if kind is bool and isinstance(value, bool):
        return value
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
        if math.isfinite(number):
            return number
    names = {str: "a string", bool: "true or false", int: "a whole number", float: "a number"}
    off = " or false (off)" if section == "settings" and key in _OPTIONAL else ""
    raise where.error(section, key, f"must be {names[kind]}{off}, got {value!r}")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shown(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "[" + ",".join(_shown(v) for v in value) + "]"
    return str(value)

"""A profile file that lists its plugins: ``[[plugin]]`` tables, built-in or a site's own.

::

    [profile]
    name = "deadlines"
    [[plugin]]
    phase = "inference"
    name = "inference-first"
    args = { reserve = 0.2 }
    [[plugin]]
    phase = "queue_order"
    name = "deadline-first"       # registered, or an entry point in group ilucid.plugins
    # use = "my_orders:DeadlineFirst"   # or a class by import path (the file's folder first)
    [[plugin]]
    phase = "plan"
    name = "in-order"

A site's plugin registers itself with :func:`ilucid.core.plugin` when its module
is imported; loading it is the only thing this module does beyond checking.
Every argument is checked here, by the plugin itself, and an error names the
file, the line and the field. See docs/plugins.md.
"""

from __future__ import annotations

import importlib
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from ilucid.core.arg_reader import PluginArgError
from ilucid.core.framework import (
    Needs,
    Phase,
    PluginRef,
    PluginSpec,
    Profile,
    plugin_spec,
    register,
    registered,
)
from ilucid.settings.profile_locator import Locator

__all__ = ["PLUGIN_GROUP", "plugin_list_profile"]

#: The entry-point group a package registers its plugins under.
PLUGIN_GROUP = "ilucid.plugins"
_KEYS = ("phase", "name", "use", "args")


def plugin_list_profile(
    where: Locator, path: Path, name: str, summary: str | None, tables: object
) -> Profile:
    """The profile of a file's ``[[plugin]]`` tables, each plugin found and its
    arguments checked."""
    if not isinstance(tables, list) or not tables:
        raise where.error("", "plugin", "must be one or more [[plugin]] tables")
    refs = [_ref(where, path, index, table) for index, table in enumerate(tables)]
    plans = [r for r in refs if r.point is Phase.PLAN]
    if len(plans) != 1:
        raise where.error(
            "", "plugin", f'needs exactly one plugin with phase = "plan", has {len(plans)}'
        )
    if summary is None:
        summary = "plugins: " + ", ".join(r.name for r in refs)
    profiling = any(r.point is Phase.PROFILING for r in refs)
    return Profile(name, summary, tuple(refs), Needs(estimates=True, profiler=profiling))


def _ref(where: Locator, path: Path, index: int, table: object) -> PluginRef:
    if not isinstance(table, dict):
        raise where.plugin_error(index, None, "must be a table")
    for key in table:
        if key not in _KEYS:
            raise where.plugin_error(index, key, f"unknown key; known: {', '.join(_KEYS)}")
    phase_text = table.get("phase")
    phases = [p.value for p in Phase]
    if phase_text not in phases:
        raise where.plugin_error(
            index, "phase", f"must be one of {', '.join(phases)}, got {phase_text!r}"
        )
    phase = Phase(phase_text)
    if "use" in table:
        spec = _imported(where, path, index, table["use"])
        if "name" in table and table["name"] != spec.name:
            raise where.plugin_error(
                index, "name", f"{table['use']} registers {spec.name!r}, not {table['name']!r}"
            )
    elif isinstance(table.get("name"), str) and table["name"]:
        spec = _named(where, index, table["name"])
    else:
        raise where.plugin_error(index, "name", 'give name = "..." or use = "module:Class"')
    if spec.phase is not phase:
        raise where.plugin_error(
            index, "phase", f"{spec.name!r} acts at {spec.phase.value}, not {phase.value}"
        )
    args = table.get("args", {})
    if not isinstance(args, dict):
        raise where.plugin_error(index, "args", "must be a table (args = { key = value })")
    try:
        spec.args(args)
    except PluginArgError as exc:
        key = f"args.{exc.key}" if exc.key else "args"
        raise where.plugin_error(index, key, exc.detail) from None
    return PluginRef(phase, spec.name, dict(args))


def _named(where: Locator, index: int, name: str) -> PluginSpec:
    """A registered plugin, else one an installed package offers under ``name``."""
    if name in registered():
        return plugin_spec(name)
    found = [e for e in metadata.entry_points(group=PLUGIN_GROUP) if e.name == name]
    if not found:
        installed = sorted({e.name for e in metadata.entry_points(group=PLUGIN_GROUP)})
        try:
            plugin_spec(name)
        except ValueError as exc:
            message = str(exc)
        raise where.plugin_error(
            index,
            "name",
            f"{message}; no entry point {name!r} in {PLUGIN_GROUP} either"
            f" (installed: {', '.join(installed) or 'none'})",
        )
    loaded = _load(where, index, "name", found[0].value, found[0].load)
    return _spec_of(where, index, "name", found[0].value, loaded, name)


def _imported(where: Locator, path: Path, index: int, use: object) -> PluginSpec:
    """``module:attr``, imported with the profile file's folder first on the path."""
    if not isinstance(use, str) or use.count(":") != 1 or not all(use.split(":")):
        raise where.plugin_error(index, "use", f'must be "module:Class", got {use!r}')
    module, attribute = use.split(":")
    folder = str(path.resolve().parent)

    def load() -> Any:
        sys.path.insert(0, folder)
        try:
            return getattr(importlib.import_module(module), attribute)
        finally:
            sys.path.remove(folder)

    loaded = _load(where, index, "use", use, load)
    return _spec_of(where, index, "use", use, loaded, None)


def _load(where: Locator, index: int, key: str, what: str, load: Any) -> object:
    try:
        return load()
    except Exception as exc:  # a site's import failed: say how, never a traceback
        raise where.plugin_error(
            index, key, f"{what} cannot be loaded: {type(exc).__name__}: {exc}"
        ) from None


def _spec_of(
    where: Locator, index: int, key: str, what: str, loaded: object, name: str | None
) -> PluginSpec:
    if isinstance(loaded, PluginSpec):
        return register(loaded)
    registered_as = getattr(loaded, "plugin_name", None)
    if isinstance(registered_as, str) and registered_as in registered():
        if name is not None and registered_as != name:
            raise where.plugin_error(
                index, key, f"{what} registers {registered_as!r}, not {name!r}"
            )
        return plugin_spec(registered_as)
    raise where.plugin_error(
        index,
        key,
        f"{what} is not a plugin: decorate it with @ilucid.core.plugin(...) or make it a"
        " PluginSpec",
    )

"""The build: a wheel whose hot modules are compiled by mypyc, the way black and mypy ship.

Everything else about the package is in ``pyproject.toml``; this file only adds the
extension modules. ``python -m build`` (or ``pip install .``) compiles the modules a
replay spends its time in (``HOT_MODULES``) into one shared library. They are the same
typed Python: the wheel also carries every ``.py``, and a replay through either gives
the same jobs CSV byte for byte (``tests/test_native.py``).

No compiler, no mypyc, or ``ILUCID_COMPILE=0``: a pure-Python wheel, said on stderr.
``ILUCID_COMPILE=1`` fails the build instead. Editable installs (``pip install -e``)
are never compiled: an extension module beside its source would shadow every later
edit of it.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

from setuptools import setup

#: the modules a profile of a replay shows hot (``python tools/hot_modules.py``: full
#: share of a Philly replay's self time under the default profile, 20,000 jobs), and the
#: ones mypyc needs beside them: the bases of their classes (``plan``), what they call
#: per event (``picklable``, ``stated_estimate``, ``reason_codes``...), since a compiled
#: module calls another compiled one directly and an interpreted one through Python.
HOT_MODULES = [
    # >= 1% of the replay's self time each, together about 75% of it
    "core/policies/default.py",
    "core/scheduler.py",
    "core/policies/preemptive.py",
    "sim/engine.py",
    "core/policies/leveled_order.py",
    "core/sorted_sums.py",
    "core/free_gpus.py",
    "core/sorted_blocks.py",
    "core/model.py",
    "core/jobs.py",
    "estimators/features.py",
    "core/placement.py",
    "core/policies/router.py",
    "core/decision.py",
    "core/expected_start.py",
    "core/policies/replan_orders.py",
    "core/policies/partner_index.py",
    "sim/replay_types.py",
    # 0.3-1% each
    "core/policies/start_words.py",
    "core/policies/inference_tier.py",
    "core/quota.py",
    # called per event by the above, or a base of their classes
    "core/policies/plan.py",
    "core/picklable.py",
    "core/stated_estimate.py",
    "core/reason_codes.py",
    "core/wait_words.py",
    "core/type_speeds.py",
    "core/progress_book.py",
    "core/topology.py",
    "core/filters.py",
    "core/fractional.py",
    "sim/explainer.py",
    # subclasses a compiled class (the engine's Replay), which interpreted code cannot
    "studies/sharded.py",
]

#: the one shared library every compiled module lives in (a top-level module of the wheel)
GROUP = "ilucid_native"


def _mode() -> str:
    """``pure`` or ``compile``, and why on stderr when pure."""
    wanted = os.environ.get("ILUCID_COMPILE", "auto").strip().lower()
    if wanted in ("0", "no", "false"):
        return _pure("ILUCID_COMPILE=0")
    commands = set(sys.argv[1:])
    if commands & {"editable_wheel", "develop"}:
        return _pure("an editable install runs its sources")
    if not commands & {"bdist_wheel", "build_ext", "build", "install"}:
        return "pure"  # metadata or an sdist: nothing to compile (and no C in the sdist)
    strict = wanted in ("1", "yes", "true")
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return _pure("mypyc is not installed", strict)
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return _pure(f"no C compiler ({compiler})", strict)
    return "compile"


def _pure(why: str, strict: bool = False) -> str:
    if strict:
        sys.exit(f"ilucid: ILUCID_COMPILE=1 but {why}")
    print(f"ilucid: building pure Python ({why})", file=sys.stderr)
    return "pure"


def _extensions() -> list[object]:
    from mypyc.build import mypycify

    here = os.path.dirname(os.path.abspath(__file__))
    config = os.path.join(here, "tools", "mypyc.ini")
    paths = [os.path.join("src", "ilucid", module) for module in HOT_MODULES]
    return list(
        mypycify(
            ["--config-file", config, *paths],
            group_name=GROUP,
            target_dir=os.path.join("build", "mypyc"),
        )
    )


setup(ext_modules=_extensions() if _mode() == "compile" else [])

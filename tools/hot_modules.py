"""Which ilucid modules a replay spends its time in: what setup.py's HOT_MODULES follows.

Profiles ``ilucid simulate`` (cProfile, on the Python sources: ``PYTHONPATH=src``) and
prints each ilucid module's share of the replay's self time, with a mark on those
setup.py compiles. Time in built-in calls (``len``, ``heapq``...) counts for no module.

    PYTHONPATH=src python tools/hot_modules.py --trace philly --limit 20000
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import pstats
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def listed() -> set[str]:
    """setup.py's HOT_MODULES, as paths below ``src/ilucid``."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "HOT_MODULES":
            return set(ast.literal_eval(node.value))
    raise SystemExit("setup.py has no HOT_MODULES")


def shares(stats: pstats.Stats) -> tuple[Counter[str], float]:
    """Self time per ilucid module (path below ``src/ilucid``) and the total."""
    per_module: Counter[str] = Counter()
    total = 0.0
    for (filename, _, _), row in stats.stats.items():  # type: ignore[attr-defined]
        total += row[2]
        if "/ilucid/" in filename and filename.endswith(".py"):
            per_module[filename.rsplit("/ilucid/", 1)[1]] += row[2]
    return per_module, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="philly")
    parser.add_argument("--limit", type=int, default=20000)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args(argv)

    from ilucid.cli.app import main as ilucid
    from ilucid.cli.core_build import core_build

    if not core_build().startswith("pure"):
        print("profile the sources: PYTHONPATH=src python tools/hot_modules.py", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as out:
        command = ["simulate", "--trace", args.trace, "--limit", str(args.limit), "--out", out]
        profiler = cProfile.Profile()
        profiler.runcall(ilucid, command)
    per_module, total = shares(pstats.Stats(profiler))
    compiled = listed()
    running = 0.0
    print(f"{'self %':>7} {'cum %':>6}  module (* = compiled by setup.py)")
    for module, seconds in per_module.most_common(args.top):
        running += seconds
        mark = "*" if module in compiled else " "
        print(f"{seconds / total:>7.1%} {running / total:>6.1%}  {mark} {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

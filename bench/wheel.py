"""The wheel a user installs: built by ``python -m build``, installed into a fresh virtual
environment, compiled core against pure build on the full Philly trace (issue #34).

Run with ``make bench-wheel``; needs ``ILUCID_TRACE_DIR``. It builds two wheels from this
checkout, the default one (setup.py compiles the hot modules with mypyc) and a pure one
(``ILUCID_COMPILE=0``), installs each into its own new virtual environment (dependencies
from the package index), and from a directory outside the checkout runs what a user runs:
``ilucid --version``, then ``ilucid simulate --trace philly`` under the default profile.
It prints each build's time, each replay's wall time (summary.json's ``wall_s``) and
whether the two jobs CSVs are the same, byte for byte; it exits 1 when they differ or the
default wheel is not compiled.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POLICY = "ilucid"  # the default profile


def build(kind: str, out: Path) -> tuple[Path, float]:
    """One wheel (``compiled`` or ``pure``) and the seconds ``python -m build`` took."""
    env = {**os.environ, **({"ILUCID_COMPILE": "0"} if kind == "pure" else {})}
    started = time.monotonic()
    # an sdist first, then the wheel from it in a clean folder: as a release builds it
    # (nothing of this checkout's build/ is reused, and the sdist must hold all it needs)
    _quiet([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], env)
    (wheel,) = out.glob("ilucid-*.whl")  # beside the sdist
    return wheel, time.monotonic() - started


def fresh_env(where: Path, wheel: Path) -> Path:
    """A new virtual environment with the wheel (and its dependencies) installed."""
    venv.create(where, with_pip=True, clear=True)
    python = where / "bin" / "python"
    _quiet([str(python), "-m", "pip", "install", "--quiet", str(wheel)], dict(os.environ))
    return where / "bin" / "ilucid"


def _quiet(command: list[str], env: dict[str, str]) -> None:
    """Run a step; its output only when it fails."""
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:4])} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")


def replay(ilucid: Path, out: Path, limit: int | None) -> tuple[str, float, bytes]:
    """``ilucid --version`` and the default profile's Philly replay from outside the
    checkout: the version line, wall_s and the jobs CSV."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # it runs from outside the checkout: a relative trace folder (make's) is resolved here
    env["ILUCID_TRACE_DIR"] = str(Path(os.environ["ILUCID_TRACE_DIR"]).resolve())
    version = subprocess.run(
        [ilucid, "--version"], env=env, cwd=out.parent, capture_output=True, text=True, check=True
    ).stdout.strip()
    command = [str(ilucid), "simulate", "--trace", "philly", "--policy", POLICY]
    command += ["--out", str(out), *(["--limit", str(limit)] if limit else [])]
    subprocess.run(command, env=env, cwd=out.parent, check=True, stdout=subprocess.DEVNULL)
    wall = float(json.loads((out / "summary.json").read_text())[POLICY]["wall_s"])
    return version, wall, (out / f"jobs-{POLICY}.csv").read_bytes()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="replay only the first N jobs (quick check)")
    args = parser.parse_args(argv)
    if not os.environ.get("ILUCID_TRACE_DIR"):
        print("set ILUCID_TRACE_DIR to the folder of public traces", file=sys.stderr)
        return 2
    rows = {}
    with tempfile.TemporaryDirectory(prefix="ilucid-wheel-") as scratch:
        for kind in ("compiled", "pure"):
            here = Path(scratch) / kind
            wheel, built_s = build(kind, here / "dist")
            print(f"{kind}: built {wheel.name} in {built_s:.0f} s", flush=True)
            ilucid = fresh_env(here / "venv", wheel)
            rows[kind] = (wheel.name, built_s, *replay(ilucid, here / "out", args.limit))
            print(f"{kind}: {rows[kind][2]}, replay {rows[kind][3]:.1f} s", flush=True)
    same = rows["compiled"][4] == rows["pure"][4]
    compiled = "core: compiled" in rows["compiled"][2]
    trace = f"first {args.limit:,} Philly jobs" if args.limit else "full Philly"
    print(f"\n{trace}, default profile, each build in a fresh virtual environment")
    print(f"{'build':<9} {'wheel':<40} {'build s':>8} {'replay s':>9}  core")
    for kind, (name, built_s, version, wall, _) in rows.items():
        print(f"{kind:<9} {name:<40} {built_s:>8.0f} {wall:>9.1f}  {version.split('core: ')[-1]}")
    ratio = rows["compiled"][3] / rows["pure"][3]
    print(f"compiled / pure replay time: {ratio:.2f}")
    print(f"jobs CSV: {'the same, byte for byte' if same else 'DIFFERENT'}")
    return 0 if same and compiled else 1


if __name__ == "__main__":
    sys.exit(main())

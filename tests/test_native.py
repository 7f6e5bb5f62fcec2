"""The compiled build (setup.py, mypyc): the wheel compiles what setup.py lists, falls
back to pure Python where it cannot compile, says which core runs, and a replay through
it is the replay through the sources, byte for byte."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from pure_python import SRC, pure_env, runs_compiled

from ilucid.cli.core_build import compiled_modules, core_build

ROOT = SRC.parent
TRACE_DIR = os.environ.get("ILUCID_TRACE_DIR")
needs_build = pytest.mark.skipif(
    not runs_compiled(), reason=f"the installed ilucid is {core_build()} (`make wheel`)"
)


def hot_modules() -> list[str]:
    """setup.py's HOT_MODULES as module names, read without running setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "HOT_MODULES":
            paths = ast.literal_eval(node.value)
            return sorted("ilucid." + p.removesuffix(".py").replace("/", ".") for p in paths)
    raise AssertionError("setup.py has no HOT_MODULES")


def test_every_listed_hot_module_exists() -> None:
    for name in hot_modules():
        assert (SRC / name.replace(".", "/")).with_suffix(".py").is_file(), name


def test_compiled_modules_are_named_by_their_most_specific_suffix(tmp_path: Path) -> None:
    package = tmp_path / "ilucid"
    (package / "core").mkdir(parents=True)
    (package / "core" / "jobs.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (package / "core" / "jobs.py").write_text("")
    (package / "build_info.py").write_text("")
    assert compiled_modules(package) == ["ilucid.core.jobs"]


def _version(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ilucid.cli", "--version"],
        env=env,
        cwd="/",  # not the checkout: what a user's shell sees
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@needs_build
def test_the_installed_wheel_runs_every_hot_module_compiled_and_the_sources_do_not() -> None:
    import ilucid

    installed = Path(ilucid.__file__).resolve().parent
    assert installed != SRC / "ilucid", "the tests must run against the installed wheel"
    assert compiled_modules(installed) == hot_modules()
    compiled, pure = _version(dict(os.environ)), _version(pure_env())
    assert f"core: compiled (mypyc, {len(hot_modules())} modules)" in compiled
    assert "core: pure Python" in pure
    assert "\n" not in compiled + pure  # argparse wraps a long --version line


#: both cases build in the repository's own build/ folder: on two xdist workers at once
#: one removed the other's dist-info mid-build (CI: "No such file ... WHEEL")
@pytest.mark.xdist_group("builds-in-the-repository")
@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ({"ILUCID_COMPILE": "0"}, "ILUCID_COMPILE=0"),
        ({"CC": "/nonexistent/cc"}, "no C compiler (/nonexistent/cc)"),
    ],
)
def test_the_build_falls_back_to_pure_python(
    tmp_path: Path, setting: dict[str, str], said: str
) -> None:
    """Where it cannot (or must not) compile, ``python -m build`` gives a pure wheel and
    says why; the setting reaches setup.py inside build's isolated environment."""
    out = tmp_path / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
        env={**os.environ, **setting},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"ilucid: building pure Python ({said})" in done.stdout + done.stderr
    (wheel,) = out.glob("ilucid-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")  # no platform tag: nothing compiled
    names = zipfile.ZipFile(wheel).namelist()
    assert "ilucid/core/scheduler.py" in names
    assert not [n for n in names if n.endswith(".so")]


@needs_build
@pytest.mark.skipif(not TRACE_DIR, reason="set ILUCID_TRACE_DIR to the public traces")
@pytest.mark.parametrize("policy", ["ilucid", "lucid", "tiresias", "tiered", "fifo"])
def test_a_replay_is_the_same_compiled_or_pure(tmp_path: Path, policy: str) -> None:
    """The first 3,000 Philly jobs under each kind of policy: the same jobs CSV."""
    outputs = {}
    for name, env in (("compiled", dict(os.environ)), ("pure", pure_env())):
        out = tmp_path / name
        command = [sys.executable, "-m", "ilucid.cli", "simulate", "--trace", "philly"]
        command += ["--limit", "3000", "--policy", policy, "--out", str(out)]
        subprocess.run(command, env=env, capture_output=True, check=True)
        summary = json.loads((out / "summary.json").read_text())[policy]
        assert summary["core"].startswith(name if name == "compiled" else "pure Python")
        outputs[name] = (out / f"jobs-{policy}.csv").read_bytes()
    assert outputs["compiled"] == outputs["pure"]


@needs_build
def test_the_build_that_installed_this_wheel_warned_of_nothing() -> None:
    """``make wheel`` keeps python -m build's output in build/wheel.log and prints its
    warnings: a first ``make serve`` once printed nine of mypyc's."""
    log = ROOT / "build" / "wheel.log"
    if not log.is_file():
        pytest.skip("no build/wheel.log: this wheel was not built by `make wheel` here")
    warnings = [line for line in log.read_text().splitlines() if ": warning: " in line]
    assert warnings == []

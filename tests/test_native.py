"""The compiled core (``make native``): used only while it matches its source, and
a replay through it is the replay through the source, byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ilucid.compiled import guard
from ilucid.compiled.guard import MANIFEST, SRC, module_source, source_hash

TRACE_DIR = os.environ.get("ILUCID_TRACE_DIR")
BUILT = guard._check(MANIFEST, SRC, {})[0]  # whatever ILUCID_PURE says in this process
needs_build = pytest.mark.skipif(not BUILT.compiled, reason=f"no compiled core: {BUILT.detail}")


def _tree(tmp_path: Path, modules: dict[str, str]) -> Path:
    """A src/ tree with these module sources, a library file and a manifest of them
    (where the build writes it); the manifest's path."""
    src = tmp_path / "src"
    hashes = {}
    for name, text in modules.items():
        path = module_source(name, src)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        hashes[name] = source_hash(path)
    (src / "ilucid_native__mypyc.so").write_bytes(b"")
    manifest = src / MANIFEST.relative_to(SRC)
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"modules": hashes, "library": "ilucid_native__mypyc.so"}))
    return manifest


def test_the_guard_trusts_a_build_only_while_every_source_matches(tmp_path: Path) -> None:
    manifest = _tree(tmp_path, {"ilucid.core.a": "A = 1\n", "ilucid.core.b": "B = 2\n"})
    src = tmp_path / "src"
    fresh, fallback = guard._check(manifest, src, {})
    assert fresh.compiled and fallback == {}
    assert "2 modules" in str(fresh)

    pure, fallback = guard._check(manifest, src, {"ILUCID_PURE": "1"})
    assert not pure.compiled and "ILUCID_PURE" in pure.detail
    assert set(fallback) == {"ilucid.core.a", "ilucid.core.b"}

    edited = module_source("ilucid.core.b", src)
    edited.write_text("B = 3\n", encoding="utf-8")
    stale, fallback = guard._check(manifest, src, {})
    assert not stale.compiled and str(edited) in stale.detail and "changed" in stale.detail
    # all of them, not only the edited one: compiled modules call each other directly
    assert set(fallback) == {"ilucid.core.a", "ilucid.core.b"}


def test_the_guard_without_a_build_or_its_library(tmp_path: Path) -> None:
    missing, fallback = guard._check(tmp_path / "none.json", tmp_path, {})
    assert not missing.compiled and "not built" in missing.detail and fallback == {}

    manifest = _tree(tmp_path, {"ilucid.core.a": "A = 1\n"})
    src = tmp_path / "src"
    (src / "ilucid_native__mypyc.so").unlink()
    gone, fallback = guard._check(manifest, src, {})
    assert not gone.compiled and "missing" in gone.detail and set(fallback) == {"ilucid.core.a"}

    manifest.write_text("{not json", encoding="utf-8")
    broken, fallback = guard._check(manifest, src, {})
    assert not broken.compiled and "unreadable manifest" in broken.detail


def test_extension_modules_no_manifest_describes_are_never_loaded(tmp_path: Path) -> None:
    """A checkout pulled over an older build (whose manifest sat elsewhere) keeps that
    build's extension modules beside the new sources: they load from source."""
    src = tmp_path / "src"
    stale = module_source("ilucid.core.framework", src)
    stale.parent.mkdir(parents=True)
    stale.write_text("NEW = 1\n", encoding="utf-8")
    stale.with_name("framework.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    stale.with_name("orphan.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")  # no .py
    status, fallback = guard._check(src / "ilucid" / "compiled" / "manifest.json", src, {})
    assert not status.compiled and "not built" in status.detail
    assert fallback == {"ilucid.core.framework": stale}


def _loaded_from(env: dict[str, str]) -> str:
    code = "import ilucid.core.scheduler as m, ilucid.compiled.guard as g;"
    code += "print(m.__file__, g.status())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@needs_build
def test_the_built_core_loads_compiled_and_ilucid_pure_turns_it_off() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ILUCID_PURE"}
    compiled = _loaded_from(env)
    assert ".so " in compiled and "compiled (" in compiled
    pure = _loaded_from({**env, "ILUCID_PURE": "1"})
    assert "scheduler.py " in pure and "pure Python (ILUCID_PURE is set)" in pure


@needs_build
@pytest.mark.skipif(not TRACE_DIR, reason="set ILUCID_TRACE_DIR to the public traces")
@pytest.mark.parametrize("policy", ["ilucid", "lucid", "tiresias", "tiered", "fifo"])
def test_a_replay_is_the_same_compiled_or_pure(tmp_path: Path, policy: str) -> None:
    """The first 3,000 Philly jobs under each kind of policy: the same jobs CSV."""
    env = {k: v for k, v in os.environ.items() if k != "ILUCID_PURE"}
    outputs = {}
    for name, extra in (("compiled", {}), ("pure", {"ILUCID_PURE": "1"})):
        out = tmp_path / name
        command = [sys.executable, "-m", "ilucid.cli", "simulate", "--trace", "philly"]
        command += ["--limit", "3000", "--policy", policy, "--out", str(out)]
        subprocess.run(command, env={**env, **extra}, capture_output=True, check=True)
        summary = json.loads((out / "summary.json").read_text())[policy]
        assert summary["core"].startswith(name if name == "compiled" else "pure Python")
        outputs[name] = (out / f"jobs-{policy}.csv").read_bytes()
    assert outputs["compiled"] == outputs["pure"]


def test_every_frozen_dataclass_of_the_compiled_modules_pickles_by_its_fields() -> None:
    """Compiled, a frozen dataclass cannot be unpickled field by field, nor one with its
    own ``__init__`` (mypyc's ``__new__`` runs it): each registers a reducer (jobs,
    clusters, configurations and job records cross processes)."""
    import dataclasses
    import importlib
    import pickle

    from ilucid.core.picklable import REGISTERED

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    try:
        from build_native import MODULES, module_name
    finally:
        sys.path.pop(0)
    frozen = set()
    for relative in MODULES:
        module = importlib.import_module(module_name(relative))
        for value in vars(module).values():
            params = getattr(value, "__dataclass_params__", None)
            ours = isinstance(value, type) and value.__module__ == module.__name__
            if ours and params is not None and params.frozen:
                frozen.add(value)
    assert frozen and frozen <= REGISTERED, sorted(c.__name__ for c in frozen - REGISTERED)
    # (those with their own __init__: tests/test_written_inits.py)
    from ilucid.core import Cluster, JobSpec, Reason, ReasonCode
    from ilucid.core.policies.default import DefaultConfig
    from ilucid.core.quota import TenantQuota
    from ilucid.sim.replay_types import JobRecord

    job = JobSpec("a", 5.0, 2, 100.0, user="u", estimate=90.0)
    cluster = Cluster.homogeneous(2, 4)
    config = DefaultConfig(quotas={"t": TenantQuota(4)}, levels=(10.0, 20.0))
    from ilucid.core.decision import Action, Decision
    from ilucid.core.model import Placement

    record = JobRecord("a", 5.0, 2, 100.0, "training", "t", first_start=7.0, packed=1)
    decision = Decision(Action.START, "a", Placement(((0, 2),)), limit_s=60.0)
    reason = Reason(ReasonCode.SCHEDULED, "a sentence", {"x": 1.0})
    for value in (job, cluster, config, reason, record, decision):
        copy = pickle.loads(pickle.dumps(value))
        assert copy == value and dataclasses.is_dataclass(copy) == dataclasses.is_dataclass(value)
    assert pickle.loads(pickle.dumps(cluster)).total_gpus == 8

"""Every command runs without traces, on generated data, and says so (issue 34, point 3).

Run as a new user would: ``python -m ilucid.cli`` from an empty folder, relative output
paths, with neither ILUCID_TRACE_DIR nor ILUCID_PROFILE_DIR set. The generated data is
kept small (``--limit``) so each run takes seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ilucid

SRC = str(Path(ilucid.__file__).resolve().parents[1])
NOTE = "no traces found (set ILUCID_TRACE_DIR): using generated data: "


def _without_traces(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ILUCID_TRACE_DIR", "ILUCID_PROFILE_DIR", "PYTHONPATH")
    }
    env["PYTHONPATH"] = SRC
    return subprocess.run(
        [sys.executable, "-m", "ilucid.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


#: each command's arguments (nothing names a trace) and the file it writes
DEFAULT_RUNS = {
    "model-train-duration": (["model", "train", "duration", "--limit", "300"], "m.pkl"),
    "model-train-forecast": (["model", "train", "forecast", "--limit", "300"], "m.pkl"),
    "model-evaluate": (
        ["model", "evaluate", "--limit", "300", "--estimators", "user-median"],
        None,
    ),
    "mixed": (["study", "mixed", "--limit", "300"], "out/mixed.json"),
    "hybrid": (["study", "hybrid", "--limit", "300"], "out/hybrid.json"),
    "hetero": (["study", "hetero", "--limit", "300", "--rules", "fastest"], "out/hetero.json"),
    "fragmentation": (["study", "fragmentation"], "out/fragmentation.json"),
}


@pytest.mark.parametrize("name", list(DEFAULT_RUNS))
def test_command_runs_on_generated_data_without_traces(name: str, tmp_path: Path) -> None:
    argv, written = DEFAULT_RUNS[name]
    out = ["--out", "m.pkl"] if name.startswith("model-train") else []
    if name in ("mixed", "hybrid", "hetero", "fragmentation"):
        out = ["--out", "out"]
    result = _without_traces(tmp_path, *argv, *out)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    notes = [line for line in result.stdout.splitlines() if line.startswith(NOTE)]
    assert len(notes) >= 1, result.stdout
    if written is not None:
        assert (tmp_path / written).stat().st_size > 0
    if written and written.endswith(".json"):
        assert json.loads((tmp_path / written).read_text())


def test_mixed_says_its_inference_is_generated_too(tmp_path: Path) -> None:
    result = _without_traces(tmp_path, "study", "mixed", "--limit", "300", "--out", "out")
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stdout.splitlines() if line.startswith(NOTE)]
    assert any("synthetic(jobs=300" in n for n in notes), notes
    assert any("generated inference(" in n for n in notes), notes
    runs = json.loads((tmp_path / "out" / "mixed.json").read_text())
    assert runs["ilucid"]["inference_share"] > 0


def test_hetero_says_its_speeds_are_generated(tmp_path: Path) -> None:
    result = _without_traces(
        tmp_path, "study", "hetero", "--limit", "300", "--rules", "fastest", "--out", "o"
    )
    assert result.returncode == 0, result.stderr
    assert "no workload profiles found (set ILUCID_PROFILE_DIR): using generated data:" in (
        result.stdout
    )
    runs = json.loads((tmp_path / "o" / "hetero.json").read_text())
    # the types differ in speed, so a job on the slower types runs below speed 1
    assert 0 < runs["type-blind"]["mean_speed"] < 1


def test_fragmentation_writes_the_generated_lists_it_packed(tmp_path: Path) -> None:
    result = _without_traces(tmp_path, "study", "fragmentation", "--out", "o")
    assert result.returncode == 0, result.stderr
    pods = tmp_path / "o" / "generated" / "openb_pod_list_generated.csv"
    assert pods.read_text().startswith("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec")
    table = json.loads((tmp_path / "o" / "fragmentation.json").read_text())
    assert set(table["generated"]) == {"best-fit", "worst-fit", "fgd"}


@pytest.mark.parametrize(
    "argv",
    [
        ["model", "train", "duration", "--out", "m.pkl"],
        ["model", "evaluate", "--estimators", "user-median"],
        ["study", "mixed", "--out", "o"],
        ["study", "hybrid", "--out", "o"],
    ],
    ids=["model-train-duration", "model-evaluate", "mixed", "hybrid"],
)
def test_trace_synthetic_is_accepted_as_simulate_accepts_it(
    argv: list[str], tmp_path: Path
) -> None:
    result = _without_traces(tmp_path, *argv, "--trace", "synthetic", "--limit", "300")
    assert result.returncode == 0, result.stderr
    # asked for by name: no note that the trace was missing (mixed still says that its
    # inference services are generated)
    notes = [line for line in result.stdout.splitlines() if line.startswith(NOTE)]
    assert not [n for n in notes if "synthetic(" in n], notes
    assert "synthetic" in result.stdout


def test_a_named_trace_without_a_trace_folder_still_fails(tmp_path: Path) -> None:
    """Only a left-out --trace falls back: a trace the user named is never replaced."""
    result = _without_traces(tmp_path, "study", "hybrid", "--trace", "itp-04", "--out", "o")
    assert result.returncode == 2
    assert "set ILUCID_TRACE_DIR" in result.stderr
    assert NOTE not in result.stdout

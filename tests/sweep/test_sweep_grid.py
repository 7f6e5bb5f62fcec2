"""The grid file and flags: cells, seeds, perturbations, and errors that name file:line: field."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from sweep_helpers import run_sweep_cli

from ilucid.sweep import DEFAULT_PARAMS, Grid, GridError, Perturbation, Settings, load_grid
from ilucid.sweep.grid import apply_settings, parse_seeds, settings_keys


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_grid_file_lists_every_cell_trace_by_trace(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
traces = ["itp-01", "itp-02"]
profiles = ["fifo", "srtf"]
seeds = "1-3"
baseline = "srtf"
out = "results/sweep.csv"
[perturbation]
kind = "shift"
scale = 2
[parameters.tight]
load = 0.95
[parameters.loose]
load = 0.6
limit = 100
""",
    )
    grid = load_grid(path)
    cells = grid.cells()
    assert len(cells) == 2 * 2 * 2 * 3
    assert [c.key for c in cells[:4]] == [
        ("itp-01", "fifo", "tight", 1),
        ("itp-01", "fifo", "tight", 2),
        ("itp-01", "fifo", "tight", 3),
        ("itp-01", "srtf", "tight", 1),
    ]
    assert {c.trace for c in cells[:12]} == {"itp-01"}
    assert grid.parameters["loose"] == Settings(load=0.6, limit=100)
    assert grid.perturbation == Perturbation("shift", 2.0)
    assert grid.out == tmp_path / "results" / "sweep.csv"  # relative to the file
    assert grid.baseline == "srtf"


def test_flags_override_the_file_and_settings_flags_apply_to_every_set(tmp_path: Path) -> None:
    path = write(tmp_path, 'traces = ["itp-01"]\nprofiles = ["fifo"]\n[parameters.a]\nload = 0.9\n')
    grid = load_grid(path, {"profiles": ("srtf", "fifo"), "seeds": None})
    assert grid.profiles == ("srtf", "fifo")
    assert grid.seeds == (0,)
    nodes = apply_settings(grid, {"nodes": 4, "limit": None})
    assert nodes.parameters["a"] == Settings(nodes=4)  # --nodes replaces the file's load


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('traces = ["a"]\nprofiles = ["fifo"]\ncolour = 1\n', ":3: colour: unknown key"),
        ('traces = ["a"]\nprofiles = ["fifo"]\nseeds = "3-1"\n', ":3: seeds:"),
        (
            'traces = ["a"]\nprofiles = ["fifo"]\n[parameters.x]\n\nload = "high"\n',
            ":5: parameters.x.load: must be a number",
        ),
        (
            'traces = ["a"]\nprofiles = ["fifo"]\n[parameters.x]\nnodes = 4\nload = 0.5\n',
            "parameters.x",
        ),
        (
            'traces = ["a"]\nprofiles = ["fifo"]\n[parameters.x]\nspeed = 2\n',
            ":4: parameters.x.speed: unknown setting",
        ),
        (
            'traces = ["a"]\nprofiles = ["fifo"]\n[perturbation]\nkind = "scramble"\n',
            ":4: perturbation.kind:",
        ),
        (
            'traces = ["a"]\nprofiles = ["fifo"]\n[perturbation]\nkind = "jitter"\nscale = 1.5\n',
            ":5: perturbation.scale:",
        ),
        ('traces = ["a"]\nprofiles = ["fifo"]\nbaseline = "srtf"\n', ":3: baseline: 'srtf' is not"),
        (
            'traces = ["a"]\nprofiles = ["fifo"]\nmetrics = ["speed"]\n',
            ":3: metrics: unknown figure",
        ),
        ('profiles = ["fifo"]\n', "traces: missing"),
        ('traces = ["a", "a"]\nprofiles = ["fifo"]\n', ":1: traces: 'a' is named twice"),
        ("traces = [\n", "grid.toml"),
    ],
)
def test_a_bad_grid_file_names_file_line_and_field(tmp_path: Path, text: str, where: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(GridError) as caught:
        load_grid(path)
    message = str(caught.value)
    assert message.startswith(str(path))
    assert where in message


def test_seeds_and_perturbations_parse() -> None:
    assert parse_seeds("1-3,7") == (1, 2, 3, 7)
    assert parse_seeds("0") == (0,)
    with pytest.raises(ValueError, match="ranges"):
        parse_seeds("1-x")
    assert Perturbation.parse("shift") == Perturbation("shift", 1.0)
    assert Perturbation.parse("jitter:0.05").label == "jitter:0.05"
    with pytest.raises(ValueError, match="kind"):
        Perturbation.parse("wobble:1")


def test_every_setting_has_a_toml_type() -> None:
    assert tuple(f.name for f in dataclasses.fields(Settings)) == tuple(settings_keys())


def test_a_grid_refuses_empty_axes_and_negative_seeds() -> None:
    with pytest.raises(ValueError, match="profiles: none given"):
        Grid(("a",), ())
    with pytest.raises(ValueError, match="seeds: must be >= 0"):
        Grid(("a",), ("fifo",), (-1,))
    assert Grid(("a",), ("fifo",)).cells()[0].params == DEFAULT_PARAMS


def test_the_command_refuses_a_bad_grid_before_starting_anything(tmp_path: Path) -> None:
    out = tmp_path / "never.csv"
    run = run_sweep_cli(["--traces", "itp-01", "--policy", "fifo,nope", "--out", str(out)])
    assert run.code == 2 and "unknown profile 'nope'" in run.stderr
    run = run_sweep_cli(["--policy", "fifo", "--out", str(out)])
    assert run.code == 2 and "--traces and --policy" in run.stderr
    run = run_sweep_cli(["--traces", "a", "--policy", "fifo", "--metric", "speed"])
    assert run.code == 2 and "metrics: unknown figure 'speed'" in run.stderr
    assert not out.exists()

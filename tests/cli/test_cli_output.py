"""What the commands print (issue 19): one table renderer (rich) for every command,
one progress display, errors on one line, ``ilucid policies`` one line a profile,
``whatif`` taking lists like ``simulate``, and where the client finds the service."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from ilucid.cli import main
from ilucid.cli.app import build_parser
from ilucid.cli.common import DEFAULT_URL, URL_FILE, service_url
from ilucid.cli.progress import ProgressDisplay
from ilucid.cli.tables import render_table, summary_table
from ilucid.core.framework import registered
from ilucid.core.policies import PROFILES

CLI = Path(__file__).resolve().parents[2] / "src" / "ilucid" / "cli"


def test_a_plain_table_is_aligned_text_at_its_natural_width() -> None:
    text = render_table(
        ("ID", "GPUS", "COMMAND"), [("j000001", 2, "sleep 30"), ("j000010", None, "true")]
    )
    lines = text.splitlines()
    assert lines[0].split() == ["ID", "GPUS", "COMMAND"]
    assert set(lines[1]) == {"-"} and len(lines[1]) == max(len(x) for x in lines)
    assert lines[2].split() == ["j000001", "2", "sleep", "30"]
    assert lines[3].split() == ["j000010", "true"]  # None prints empty
    # numbers right-aligned by default: the GPU count ends where its heading ends
    assert lines[2].index("2") == lines[0].index("GPUS") + len("GPUS") - 1
    assert all(line == line.rstrip() for line in lines) and text.isascii()


def test_a_wide_table_is_never_wrapped_when_not_on_a_terminal() -> None:
    header = [f"column {i}" for i in range(30)]
    text = render_table(header, [[f"value-{i}" for i in range(30)]])
    lines = text.splitlines()
    assert len(lines) == 3 and len(lines[0]) > 300
    assert lines[2].split() == [f"value-{i}" for i in range(30)]


def test_align_must_name_each_column() -> None:
    with pytest.raises(ValueError, match="each of the 2 columns"):
        render_table(("a", "b"), [(1, 2)], align="l")
    with pytest.raises(ValueError, match="a row has 1 cells"):
        render_table(("a", "b"), [(1,)])


def test_a_summary_row_a_figure_lacks_prints_a_dash() -> None:
    summary = {
        "policy": "fifo",
        "jobs": 10,
        "avg_jct": float("nan"),
        "p50_jct": 1.0,
        "p99_jct": 2.0,
        "avg_queue": 0.0,
        "p99_queue": 0.0,
        "gpu_util": 0.5,
        "preemptions": 0,
        "wall_s": 0.1,
    }
    row = summary_table([summary]).splitlines()[2].split()
    assert row[:3] == ["fifo", "10", "-"] and "50.0%" in row


def test_every_command_prints_tables_through_the_one_renderer() -> None:
    """No command lays out columns by hand (width specifiers, ljust): tables go
    through ilucid.cli.tables. (sweep.py is another command's and uses it too.)"""
    by_hand = re.compile(r"\{[^{}]*:[<>^]?\d+[,.]?\d*[a-z%]?\}|\.ljust\(|\.rjust\(")
    offenders = []
    for path in sorted(CLI.rglob("*.py")):
        if path.name in ("tables.py", "sweep.py"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if by_hand.search(line) and "perf_counter" not in line:
                offenders.append(f"{path.relative_to(CLI)}:{number}: {line.strip()}")
    # `ilucid traces` (info.py) is another engineer's while this lands
    assert [o for o in offenders if not o.startswith("info.py")] == [], offenders


def test_progress_off_a_terminal_is_a_line_a_quarter(capsys: pytest.CaptureFixture[str]) -> None:
    with ProgressDisplay(["fifo", "sjf"]) as progress:
        for step in range(1, 11):
            progress.update([step / 10, step / 20])
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "simulated 8% (fifo, sjf)"  # (10% + 5%) / 2, rounded
    assert err[-1] == "simulated 100% (fifo, sjf)"
    assert 3 <= len(err) <= 5  # about one a quarter, never one an update


def test_policies_lists_every_profile_in_one_row(capsys: pytest.CaptureFixture[str]) -> None:
    """One row a profile; a long summary wraps onto indented lines (100 columns)."""
    assert main(["policies"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows: list[str] = []
    for line in lines[2 : lines.index("")]:
        if line.startswith(" "):  # the summary going on under its column
            rows[-1] += " " + line.strip()
        else:
            rows.append(line)
    assert len(rows) == len(PROFILES)
    names = [row.split()[0] for row in rows]
    expected = ["static-partition:N" if n == "static-partition" else n for n in PROFILES]
    assert names == expected
    for row, profile in zip(rows, PROFILES.values(), strict=True):
        assert " ".join(row.split()).endswith(" ".join(profile.summary.split()))
    assert "(default)" in next(r for r in rows if r.startswith("ilucid "))


def test_policies_lists_each_plugin_with_its_phase_and_arguments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["policies"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("PLUGIN "))
    rows = {line.split()[0]: line.split()[1:3] for line in lines[header + 2 :] if line}
    for name, spec in registered().items():
        assert rows[name][0] == spec.phase.value
    assert rows["las"][1] == "thresholds=18000"  # its decoded default
    made_of = next(line for line in lines if line.startswith("tiresias ") and "(plan)" in line)
    assert made_of.split(None, 1)[1] == "las (queue_order), replan (plan)"


def test_whatif_takes_lists_like_simulate(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(["whatif", "--policy", "fifo,sjf"]).policy == ["fifo", "sjf"]
    assert parser.parse_args(["simulate", "--trace", "x", "--out", "o", "--policy", "fifo,sjf"])
    mixed = parser.parse_args(["whatif", "--policy", "static-partition:2, tiresias"])
    assert mixed.policy == ["static-partition:2", "tiresias"]
    with pytest.raises(SystemExit):
        parser.parse_args(["whatif", "--policy", "fifo,nonsense"])
    assert "unknown policy 'nonsense'" in capsys.readouterr().err


def test_an_error_is_one_line_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["jobs", "--url", "http://127.0.0.1:9", "--token", "t", "--data-dir", str(tmp_path)]
    )
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("ilucid: error: cannot reach the service at http://127.0.0.1:9")


def _args(tmp_path: Path, url: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(url=url, data_dir=tmp_path)


def test_the_client_finds_the_service_url_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ILUCID_URL", raising=False)
    assert service_url(_args(tmp_path)) == DEFAULT_URL  # nothing written yet
    (tmp_path / URL_FILE).write_text("http://127.0.0.1:8799\n")
    assert service_url(_args(tmp_path)) == "http://127.0.0.1:8799"  # what serve wrote
    monkeypatch.setenv("ILUCID_URL", "http://gpu-host:9000")
    assert service_url(_args(tmp_path)) == "http://gpu-host:9000"  # the environment wins
    assert service_url(_args(tmp_path, "http://other:1")) == "http://other:1"  # --url wins


@pytest.mark.parametrize("value", ["0.5", "0", "1e-320", "inf", "nan", "soon"])
def test_submit_refuses_an_estimate_under_one_second(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["submit", "--estimate", value, "--", "sleep", "1"])
    assert "--estimate" in capsys.readouterr().err
    assert parser.parse_args(["submit", "--estimate", "1", "--", "sleep", "1"]).estimate == 1.0

"""``ilucid traces`` names the folder it searched and the files each trace name expects."""

from __future__ import annotations

from pathlib import Path

import pytest

from ilucid.cli import main
from ilucid.traces import KNOWN_INFERENCE, KNOWN_TRACES
from ilucid.traces.sources import TRACE_SOURCES, expected_files

DOCS = Path(__file__).resolve().parents[2] / "docs" / "traces.md"


def _traces_output(capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["traces"]) == 0
    return capsys.readouterr().out.splitlines()


def _row(lines: list[str], relative: str) -> str:
    return next(line for line in lines if relative in line)


def test_an_empty_folder_is_named_and_each_expected_file_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ILUCID_TRACE_DIR", str(tmp_path))
    lines = _traces_output(capsys)
    assert lines[0] == f"trace folder: {tmp_path} (from ILUCID_TRACE_DIR)"
    philly = _row(lines, "philly-rfold/philly_trace.csv")
    assert philly.split()[0] == "philly"
    assert "missing" in philly
    assert "github.com/shuoshuc/RFold" in philly
    for name in [*KNOWN_TRACES, *KNOWN_INFERENCE]:
        for expected in expected_files(name):
            assert "missing" in _row(lines, expected.relative), expected.relative
    assert "not found" not in "\n".join(lines)


def test_a_file_laid_out_as_expected_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    itp = tmp_path / "msft-itp" / "cluster04.csv"
    itp.parent.mkdir()
    itp.write_text("job_id,submission_time,duration,num_gpu\n")
    monkeypatch.setenv("ILUCID_TRACE_DIR", str(tmp_path))
    lines = _traces_output(capsys)
    assert "found" in _row(lines, "msft-itp/cluster04.csv").split()
    assert "missing" in _row(lines, "msft-itp/cluster03.csv").split()


def test_without_the_variable_it_says_no_folder_is_searched(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ILUCID_TRACE_DIR", raising=False)
    lines = _traces_output(capsys)
    assert lines[0].startswith("trace folder: none. ILUCID_TRACE_DIR is not set")
    assert "missing" not in "\n".join(lines)
    assert "philly-rfold/philly_trace.csv" in _row(lines, "philly")


def test_a_folder_that_does_not_exist_is_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ILUCID_TRACE_DIR", str(tmp_path / "nowhere"))
    lines = _traces_output(capsys)
    assert lines[0].endswith("(from ILUCID_TRACE_DIR; it does not exist)")


def test_the_docs_name_every_expected_file_its_repository_and_licence() -> None:
    """docs/traces.md and the command agree: the same files, repositories and licences."""
    text = DOCS.read_text()
    for name in [*KNOWN_TRACES, *KNOWN_INFERENCE]:
        for expected in expected_files(name):
            assert expected.relative in text, expected.relative
    for source in TRACE_SOURCES.values():
        assert source.repository in text, source.repository
        assert source.licence in text, source.licence
    assert "../shared" not in text

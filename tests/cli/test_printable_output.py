"""What users chose (a command, a user or tenant name, a trace's job id) reaches the
terminal only as text: control characters and terminal escapes are shown escaped
(``\\x1b``, ``\\n``) and ``[red]`` is never read as rich markup, in plain and in
terminal output. ``ilucid jobs`` runs against the real API (in-process, SQLite, the
local backend on virtual GPUs)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.cli import client as client_commands
from ilucid.cli import main
from ilucid.cli.common import print_error, printable
from ilucid.cli.tables import print_table, render_table
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService

#: clears the screen, sets the window title, turns text red; then a forged line
HOSTILE_USER = "ev\x1b]0;owned\x07il\x1b[2J"
HOSTILE_COMMAND = ["\x1b[31mX", "a\nb", "[red]y[/]"]


def test_printable_escapes_what_a_terminal_would_act_on() -> None:
    assert printable("a\x1b[31mb\nc\rd\te\x7f\x9b") == "a\\x1b[31mb\\nc\\rd\\te\\x7f\\x9b"
    assert printable("right-to-left \u202e override, \u2028 line") == (
        "right-to-left \\u202e override, \\u2028 line"
    )
    assert printable("é 😀 [red]x[/red] a\\b") == "é 😀 [red]x[/red] a\\b"  # shown as it is
    assert printable("lone \ud800") == "lone \\ud800"  # would not even encode
    assert printable(42) == "42"


@pytest.fixture()
def api(tmp_path: Path) -> TestClient:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    migrate(url)
    engine = make_engine(url)
    token = create_token(engine, HOSTILE_USER, "team[bold]")
    service = SchedulerService(engine, LocalBackend(tmp_path, GpuInventory(2, "virtual", 0, "v")))
    client = TestClient(build_app(service), headers={"Authorization": f"Bearer {token}"})
    answer = client.post("/jobs", json={"command": HOSTILE_COMMAND, "gpus": 1, "name": "[b]n"})
    assert answer.status_code == 201, answer.text
    return client


def test_ilucid_jobs_shows_a_hostile_command_and_user_escaped(
    api: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert client_commands._jobs(api, argparse.Namespace()) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    lines = out.splitlines()
    assert len(lines) == 3, out  # header, rule, one row: the newline forged no line
    assert "ev\\x1b]0;owned\\x07il\\x1b[2J" in lines[2]
    assert "\\x1b[31mX a\\nb [red]y[/]" in lines[2]  # markup shown, not applied


def test_a_terminal_table_applies_no_markup_or_escape_from_a_cell(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich then draws for a terminal
    monkeypatch.setenv("COLUMNS", "200")
    print_table(("ID", "NAME [b]"), [("j1", "[red]x[/red]\x1b[2J\nforged")], align="ll")
    out = capsys.readouterr().out
    assert "\x1b[1m" in out  # rich's own bold header: this is the terminal path
    assert "\x1b[2J" not in out and "\x1b[31m" not in out
    assert "[red]x[/red]\\x1b[2J\\nforged" in out and "NAME [b]" in out


def test_a_table_title_is_text_too() -> None:
    text = render_table(("a column wider than the title",), [("1",)], title="[red]t\x1b[0m")
    assert text.splitlines()[0] == "[red]t\\x1b[0m"


def test_an_error_is_one_escaped_line(capsys: pytest.CaptureFixture[str]) -> None:
    print_error("bad value 'x\x1b[2J\nilucid: all good'")
    err = capsys.readouterr().err
    assert err == "ilucid: error: bad value 'x\\x1b[2J\\nilucid: all good'\n"


def test_simulate_explains_a_trace_job_whose_id_holds_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = "j\x1b]0;t\x07[red]1"
    trace = tmp_path / "t.csv"
    trace.write_text(
        f'id,submit_time,num_gpus,duration\n"{job}",0,1,100\nj2,10,1,50\n',
        encoding="utf-8",
    )
    argv = ["simulate", "--trace", str(trace), "--policy", "fifo", "--nodes", "1"]
    assert main([*argv, "--out", str(tmp_path / "out"), "--explain", job]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "j\\x1b]0;t\\x07[red]1 under fifo" in out

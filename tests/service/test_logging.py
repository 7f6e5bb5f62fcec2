"""The service reports through :mod:`logging` (issue 31): ``ilucid serve --log-format json``
writes one JSON object per line, and a job's moves carry its id and their stimulus's;
``--log-level`` filters; a bad level is one line of error; no ``print`` is left in the
service or the backends; a move rolled back is never logged."""

from __future__ import annotations

import ast
import json
import logging
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session

from ilucid.cli.serve.log_setup import JsonFormatter, TextFormatter
from ilucid.core import JobClass
from ilucid.estimators.live import DurationEstimate
from ilucid.service.db import make_engine, migrate
from ilucid.service.job_store import JobRequest, JobStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import free_port, run_ilucid, serve_command

SRC = Path(__file__).resolve().parents[2] / "src" / "ilucid"
#: this environment without ILUCID_* (no URL, token or log setting of the caller's)
ENV = {k: v for k, v in os.environ.items() if not k.startswith("ILUCID_")}


def _serve_one_job(tmp_path: Path, *options: str) -> tuple[str, list[str], dict[str, Any]]:
    """A real ``ilucid serve`` (1 virtual GPU) with ``options``; one job submitted, run to
    its end, then the service stopped with SIGINT. The job's id, every line the service
    wrote to stdout and to stderr, and the job's explanation from the API."""
    data, port = tmp_path / "data", free_port()
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        server = subprocess.Popen(
            serve_command(data, port, 1, 0.2, *options), stdout=stdout, stderr=stderr, env=ENV
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while not _up(url):
                assert server.poll() is None and time.monotonic() < deadline, err.read_text()
                time.sleep(0.2)
            token = (data / "admin.token").read_text().strip()
            env = {**ENV, "ILUCID_URL": url, "ILUCID_TOKEN": token}
            submitted = run_ilucid("submit", "--gpus", "1", "--", "true", env=env)
            assert submitted.returncode == 0, submitted.stderr
            job = submitted.stdout.strip()
            headers = {"Authorization": f"Bearer {token}"}
            while (explained := httpx.get(f"{url}/jobs/{job}/explain", headers=headers).json())[
                "state"
            ] != "succeeded":
                assert time.monotonic() < deadline, explained
                time.sleep(0.2)
            server.send_signal(signal.SIGINT)
            assert server.wait(timeout=30) == 0, err.read_text()
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
    lines = out.read_text().splitlines() + err.read_text().splitlines()
    return job, lines, explained


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_json_lines_are_objects_and_a_start_names_its_job_and_stimulus(tmp_path: Path) -> None:
    job, lines, explained = _serve_one_job(tmp_path, "--log-format", "json")
    assert lines
    records = [json.loads(line) for line in lines]  # every line, stdout and stderr: JSON
    for record in records:
        assert isinstance(record, dict)
        assert {"time", "level", "logger", "message"} <= record.keys(), record
        stamp = datetime.fromisoformat(record["time"].replace("Z", "+00:00"))
        assert stamp.utcoffset() == UTC.utcoffset(None), record
    assert any(r["message"].startswith("API on http://127.0.0.1:") for r in records), records
    # the start decision: the job's id, and the id of the pass that decided it, as its
    # stored story has it
    (decided,) = [move for move in explained["story"] if move["to_phase"] == "decided"]
    starts = [r for r in records if r.get("job_id") == job and "-> decided" in r["message"]]
    assert len(starts) == 1, records
    assert starts[0]["stimulus_id"] == decided["stimulus_id"]
    assert starts[0]["stimulus_id"].startswith("pass-")
    assert starts[0]["level"] == "info" and starts[0]["logger"] == "ilucid.service.job_store"
    ended = [r for r in records if r.get("job_id") == job and "-> succeeded" in r["message"]]
    assert len(ended) == 1 and ended[0]["stimulus_id"].startswith("observe-"), records


def test_warning_level_hides_the_info_lines(tmp_path: Path) -> None:
    job, lines, explained = _serve_one_job(
        tmp_path, "--log-format", "json", "--log-level", "warning"
    )
    assert explained["state"] == "succeeded"  # it ran: under info its moves were logged
    records = [json.loads(line) for line in lines]
    assert all(r["level"] in ("warning", "error") for r in records), records
    assert not any(job in line or "API on" in line for line in lines), lines


@pytest.mark.parametrize(
    ("given", "env", "said"),
    [
        (
            ["--log-level", "loud"],
            {},
            "--log-level 'loud': give one of debug, info, warning, error",
        ),
        (["--log-format", "xml"], {}, "--log-format 'xml': give one of text, json"),
        ([], {"ILUCID_LOG_LEVEL": "verbose"}, "ILUCID_LOG_LEVEL 'verbose': give one of"),
    ],
)
def test_a_bad_level_or_format_is_one_line_of_error(
    tmp_path: Path, given: list[str], env: dict[str, str], said: str
) -> None:
    data = tmp_path / "data"
    refused = run_ilucid(
        "serve", "--data-dir", str(data), "--port", "0", *given, env={**ENV, **env}
    )
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert len(refused.stderr.splitlines()) == 1, refused.stderr
    assert refused.stderr.startswith(f"ilucid: error: {said}"), refused.stderr
    assert not data.exists()  # refused before anything was made


def test_in_json_a_refusal_at_start_is_a_json_line_too(tmp_path: Path) -> None:
    refused = run_ilucid(
        "serve",
        "--data-dir",
        str(tmp_path / "data"),
        "--log-format",
        "json",
        "--policy",
        "nonesuch",
        env=ENV,
    )
    assert refused.returncode == 2
    assert refused.stderr == ""
    (line,) = refused.stdout.splitlines()
    record = json.loads(line)
    assert record["level"] == "error"
    assert record["message"].startswith("ilucid: error: --policy must be one of"), record


def test_no_print_is_left_in_the_service_and_the_backends() -> None:
    found = []
    for package in ("service", "backends"):
        for path in sorted((SRC / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == "print"
                ):
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert found == []


def test_a_move_is_logged_once_committed_never_when_rolled_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    store = JobStore(engine, time.time)
    estimate = DurationEstimate(None, "none", 0.0, (), "")
    caplog.set_level(logging.INFO, logger="ilucid")
    with Session(engine) as session:
        lost = store.add(session, JobRequest(["true"]), JobClass.TRAINING, estimate, 1.0).id
        session.rollback()  # as when another replica took the id
        kept = store.add(session, JobRequest(["true"]), JobClass.TRAINING, estimate, 1.0).id
        assert caplog.records == []  # not before the commit
        session.commit()
    ((record,),) = [[r for r in caplog.records if r.name == "ilucid.service.job_store"]]
    assert record.getMessage().startswith(f"{kept}: new -> pending: submitted (request: submit")
    assert getattr(record, "job_id", None) == kept
    assert str(getattr(record, "stimulus_id", "")).startswith("submit-")
    assert lost != kept and all(lost not in r.getMessage() for r in caplog.records)


def test_the_formats_keep_one_record_on_one_line() -> None:
    """A message with a line break, a Unicode line separator and an escape sequence: one
    JSON line that keeps it exactly, one text line that shows it escaped."""
    text = "j000001: cwd /tmp/a\nforged line\u2028\x1b[31m"
    record = logging.LogRecord("ilucid.x", logging.WARNING, __file__, 1, text, (), None)
    record.job_id = "j000001"
    as_json = JsonFormatter().format(record)
    assert len(as_json.splitlines()) == 1
    assert json.loads(as_json)["message"] == text
    assert json.loads(as_json)["job_id"] == "j000001"
    as_text = TextFormatter().format(record)
    assert len(as_text.splitlines()) == 1
    assert as_text == "warning: j000001: cwd /tmp/a\\nforged line\\u2028\\x1b[31m"

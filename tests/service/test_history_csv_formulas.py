"""``/history.csv`` quotes a tenant or user a spreadsheet would run (``=HYPERLINK(...)``,
``@SUM(...)``), keeps its numbers, and ``ilucid whatif``'s reader reads the names back
as they were. A real job runs on the service (SQLite, the local backend on virtual
GPUs, the loop driven by hand)."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

from fastapi.testclient import TestClient

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService
from ilucid.traces import load_trace

TENANT = '=HYPERLINK("http://evil.example","x")'
USER = "@SUM(1+1)"


def test_history_csv_quotes_formula_names_and_reads_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    admin = create_token(engine, "root", "ops", admin=True)
    user = create_token(engine, USER, TENANT)
    backend = LocalBackend(tmp_path, GpuInventory(1, "virtual", 0, "virtual"), grace_s=2.0)
    service = SchedulerService(engine, backend)
    client = TestClient(build_app(service))
    answer = client.post(
        "/jobs", json={"command": ["true"], "gpus": 1}, headers={"Authorization": f"Bearer {user}"}
    )
    assert answer.status_code == 201, answer.text
    job = answer.json()["id"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        service.reconcile()
        shown = client.get(f"/jobs/{job}", headers={"Authorization": f"Bearer {admin}"}).json()
        if shown["state"] == "succeeded":
            break
        time.sleep(0.05)
    assert shown["state"] == "succeeded", shown
    text = client.get("/history.csv", headers={"Authorization": f"Bearer {admin}"}).text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["id"], r["tenant"], r["user"]) for r in rows] == [(job, "'" + TENANT, "'" + USER)]
    assert float(rows[0]["submit_time"]) > 0 and float(rows[0]["duration"]) >= 0
    exported = tmp_path / "history.csv"
    exported.write_text(text, encoding="utf-8")
    replayed = load_trace(str(exported)).jobs[0]  # what `ilucid whatif` reads
    assert (replayed.id, replayed.tenant, replayed.user) == (job, TENANT, USER)

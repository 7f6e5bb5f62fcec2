"""The local backend's logs: capped with head and tail kept, and removed when old."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.backends.runner import CappedLog


def test_a_capped_log_keeps_its_head_a_rolling_tail_and_counts_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "stdout.log"
    log = CappedLog(str(path), cap=1000)  # head 500, tail 500
    log.write(b"H" * 400)
    log.write(b"M" * 2000)  # 100 to the head, then 1,900 through the tail
    log.write(b"T" * 300)
    log.close()
    text = path.read_bytes()
    assert text.startswith(b"H" * 400 + b"M" * 100 + b"\n[ilucid: 1,700 bytes cut here")
    assert text.endswith(b"M" * 200 + b"T" * 300)
    assert len(text) < 1000 + 200  # the cap, and the note
    assert Path(str(path) + ".cut").read_text() == "1700"

    again = CappedLog(str(path), cap=1000)  # a relaunch appends to the cut log
    again.write(b"Z" * 100)
    again.close()
    text = path.read_bytes()
    assert text.count(b"bytes cut here") == 1 and b"1,800 bytes cut" in text
    assert text.endswith(b"M" * 100 + b"T" * 300 + b"Z" * 100)


def test_a_short_log_is_written_as_it_comes(tmp_path: Path) -> None:
    path = tmp_path / "stderr.log"
    log = CappedLog(str(path), cap=1000)
    log.write(b"one\n")
    assert path.read_bytes() == b"one\n"  # no buffering below the cap
    log.close()
    assert not Path(str(path) + ".cut").exists()


def test_logs_of_ended_jobs_go_after_the_retention(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    for job_id, age_days, tracked in (("old", 40, False), ("new", 1, False), ("live", 40, True)):
        folder = jobs / job_id
        folder.mkdir(parents=True)
        (folder / "stdout.log").write_text("out")
        if tracked:  # a job the service still tracks keeps its folder, however old
            (folder / "gpus").write_text("0")
            (folder / "exit").write_text("0")
        old = time.time() - age_days * 86400
        os.utime(folder / "stdout.log", (old, old))
    backend = LocalBackend(tmp_path, GpuInventory(1, "virtual", 0, "v"), log_retention_days=30)
    backend.observe()
    assert sorted(p.name for p in jobs.iterdir()) == ["live", "new"]

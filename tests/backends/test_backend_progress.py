"""Each backend reads a job's own progress report: the local one from the end of the
job's output and from its progress file, Slurm from the output file its sbatch names."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ilucid.backends.base import ObservedJob, ProcessState
from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.backends.slurm import SlurmBackend
from ilucid.backends.slurm_parse import SlurmJob

RUN_AS = "#61193" if os.geteuid() == 0 else None
SRC = str(Path(__file__).resolve().parents[2] / "src")
#: the system's Python: a job's uid may not reach the one running the tests
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"


def _seen(backend: LocalBackend, now: list[float], want: object) -> ObservedJob:
    """Observe until the job's progress is ``want`` (the memo is read again each time:
    the test's clock moves 10 s a look)."""
    deadline = time.monotonic() + 20
    while True:
        now[0] += 10.0
        seen = backend.observe().jobs["j1"]
        if seen.progress == want or time.monotonic() > deadline:
            return seen
        time.sleep(0.1)


def test_the_local_backend_reads_the_output_then_the_newer_progress_file(tmp_path: Path) -> None:
    now = [0.0]
    backend = LocalBackend(tmp_path, GpuInventory(1, "virtual", 0, "v"), clock=lambda: now[0])
    script = (
        "import sys, time, os\n"
        f"sys.path.insert(0, {SRC!r})\n"
        "from ilucid.progress import report\n"
        "print('noise ' * 5000)\n"  # a lot of output: only the tail is read
        "print('INFO ILUCID_PROGRESS step=3 total=10', flush=True)\n"
        "while not os.path.exists(os.environ['ILUCID_PROGRESS_FILE'] + '.go'):\n"
        "    time.sleep(0.05)\n"
        "time.sleep(1.1)\n"  # the file is written after the line: it is the newer report
        "report(7, 10)\n"
        "time.sleep(60)\n"
    )
    backend.start("j1", [PYTHON, "-c", script], 1, run_as=RUN_AS)
    try:
        assert _seen(backend, now, (3.0, 10.0)).progress == (3.0, 10.0)
        where = (backend.root / "j1" / "progress").read_text().split("\n")
        folder = Path(where[1]).parent
        assert folder.stat().st_uid == int(where[0])  # the job's own user's, to write
        assert os.environ.get("ILUCID_PROGRESS_FILE") is None
        # the service's signal to go on: a file beside the job's (its folder is 0700)
        Path(where[1] + ".go").touch()
        seen = _seen(backend, now, (7.0, 10.0))
        assert seen.state is ProcessState.RUNNING and seen.progress == (7.0, 10.0)
    finally:
        backend.stop("j1")
        deadline = time.monotonic() + 20
        while backend.observe().jobs["j1"].state is not ProcessState.EXITED:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    backend.forget("j1")
    assert not folder.exists()  # its progress folder goes with the job


def test_a_progress_file_of_another_owner_or_a_link_is_not_read(tmp_path: Path) -> None:
    from ilucid.backends.progress_files import read_progress_file

    good = tmp_path / "progress.json"
    good.write_text('{"step": 1, "total": 2}')
    assert read_progress_file(good, owner=os.geteuid()) is not None
    assert read_progress_file(good, owner=os.geteuid() + 1) is None
    link = tmp_path / "link.json"
    link.symlink_to(good)
    assert read_progress_file(link) is None
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert read_progress_file(fifo) is None  # and it does not block


def test_slurm_reads_the_last_report_in_the_jobs_output_file(tmp_path: Path) -> None:
    now = [0.0]
    backend = SlurmBackend(tmp_path, clock=lambda: now[0])
    output = backend.root / "j1" / "stdout.log"
    output.parent.mkdir(parents=True)
    output.write_bytes(
        b"srun: step started\nILUCID_PROGRESS step=10 total=100\n\xff\xfe\n"
        b"epoch 2 ILUCID_PROGRESS step=20 total=100\nILUCID_PROGRESS step=2"
    )
    running = SlurmJob(7, f"{backend.prefix}j1", "RUNNING", "", "", "", (), "", "", "", 0, 0)
    assert backend._as_observed("j1", running).progress == (20.0, 100.0)
    with output.open("ab") as handle:
        handle.write(b"5 total=100\n")
    assert backend._as_observed("j1", running).progress == (20.0, 100.0)  # read <10 s ago
    now[0] = 10.0
    assert backend._as_observed("j1", running).progress == (25.0, 100.0)
    pending = SlurmJob(
        7, f"{backend.prefix}j1", "PENDING", "JobHeldUser", "", "", (), "", "", "", 0, 0
    )
    assert backend._as_observed("j1", pending).progress is None

"""``ilucid demo``: the policies on Philly (or a synthetic trace), then the live service."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ilucid.cli.common import Command, positive_int
from ilucid.cli.simulate import simulate_trace
from ilucid.cli.tables import print_table
from ilucid.core.policies import DEFAULT_PROFILE
from ilucid.sim.runner import DEFAULT_START_PREDICTIONS
from ilucid.traces import KNOWN_TRACES, load_trace, synthetic_trace, trace_dir

__all__ = ["COMMANDS", "live_demo"]


def _add_arguments(demo: argparse.ArgumentParser) -> None:
    demo.add_argument("--out", type=Path, default=Path("out/demo"), help="output directory")
    demo.add_argument(
        "--limit",
        type=positive_int,
        default=None,
        help="replay only the first N jobs (default: all of Philly, 5,000 synthetic)",
    )


def _demo(args: argparse.Namespace) -> int:
    directory = trace_dir()
    philly = directory / KNOWN_TRACES["philly"] if directory else None
    policies = ["fifo", "sjf", "tiresias", "srtf", "qssf", "lucid", "ilucid"]
    sim_args = argparse.Namespace(
        nodes=None,
        gpus_per_node=8,
        load=None,
        limit=args.limit,
        tiresias_interval=None,
        tiresias_threshold=None,
        overhead_small=40.0,
        overhead_large=60.0,
        processes=None,
        explain=None,
        no_profiles=False,
        progress_share=0.0,
        start_predictions=DEFAULT_START_PREDICTIONS,
    )
    if philly is not None and philly.exists():
        trace = load_trace("philly", limit=args.limit)
    else:
        print(
            "ILUCID_TRACE_DIR is not set or holds no Philly trace:"
            " running on a SYNTHETIC trace (see ilucid/traces/synthetic.py)"
        )
        trace = synthetic_trace(jobs=args.limit or 5000)
    code = simulate_trace(sim_args, trace, policies, args.out)
    return code or live_demo()


def live_demo(data_dir: Path | None = None) -> int:
    """A few real jobs through the live service on 2 virtual GPUs (SQLite, local backend).

    A training job starts, a real-time inference job preempts it, the training
    job resumes; every transition is printed with its reason.
    """
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from ilucid.backends.local import LocalBackend
    from ilucid.backends.local_host import GpuInventory
    from ilucid.service.db import JobRow, TransitionRow, make_engine, migrate
    from ilucid.service.job_store import JobRequest
    from ilucid.service.scheduler_service import SchedulerService

    folder = Path(tempfile.mkdtemp(prefix="ilucid-demo-")) if data_dir is None else data_dir
    url = f"sqlite:///{folder / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    backend = LocalBackend(folder, GpuInventory(2, "virtual", 0.0, "virtual"), grace_s=5.0)
    service = SchedulerService(engine, backend, policy=DEFAULT_PROFILE)
    print(
        f"\nlive demo: the service on 2 virtual GPUs under the default profile"
        f" ({DEFAULT_PROFILE}), state in {url}"
    )
    trap = "trap 'echo checkpoint and stop; exit 143' TERM; sleep 4 & wait; echo trained"
    train = service.submit(JobRequest(["sh", "-c", trap], gpus=2, estimate_s=600, user="ana"))
    service.reconcile()
    time.sleep(0.5)
    serve = service.submit(
        JobRequest(["sh", "-c", "echo serving; sleep 1"], gpus=1, job_class="inference", user="ben")
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        service.reconcile()
        with Session(engine) as session:
            states = {r.id: r.state for r in session.scalars(select(JobRow))}
        if all(s in ("succeeded", "failed", "cancelled") for s in states.values()):
            break
        time.sleep(0.2)
    with Session(engine) as session:
        for job_id in (train, serve):
            moves = session.scalars(
                select(TransitionRow)
                .where(TransitionRow.job_id == job_id)
                .order_by(TransitionRow.id)
            )
            print_table(
                ("from", "to", "why"),
                [(t.from_state or "new", t.to_state, t.reason) for t in moves],
                align="lll",
                title=f"{job_id}:",
            )
    print(f"{train} output: {backend.logs(train).strip()!r}")
    return 0


COMMANDS = (
    Command("demo", "compare the policies on Philly (or a synthetic trace)", _add_arguments, _demo),
)

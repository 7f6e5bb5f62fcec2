"""``ilucid serve``'s options, in groups: where the service keeps state and listens,
scheduling, the live duration model, the backend, and its log."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ilucid.cli.common import DEFAULT_DATA, DEFAULT_PORT, URL_FILE
from ilucid.cli.serve.log_setup import add_log_arguments

__all__ = ["DEFAULT_VIRTUAL_GPUS", "add_serve_arguments"]

#: GPUs ``ilucid serve`` offers on a host where NVML finds none (``make serve GPUS=``)
DEFAULT_VIRTUAL_GPUS = 4


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a number above 0")
    return value


def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    return value


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    """``ilucid serve``'s options, in groups: where, which policy, the duration model,
    the backend, and how it logs."""
    _add_where_options(serve.add_argument_group("where the service keeps state and listens"))
    _add_policy_options(serve.add_argument_group("scheduling"))
    _add_model_options(serve.add_argument_group("the live duration model"))
    _add_backend_options(serve.add_argument_group("backend (where jobs run)"))
    add_log_arguments(serve.add_argument_group("what the service reports (its log)"))


def _add_where_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA,
        help="state: the SQLite database, the admin token, job logs, the URL served",
    )
    group.add_argument("--db", help="database URL (default: SQLite in --data-dir)")
    group.add_argument(
        "--gpus",
        type=int,
        default=None,
        help="virtual GPUs to offer (default: NVML's GPUs when a driver answers, else"
        f" {DEFAULT_VIRTUAL_GPUS} virtual ones)",
    )
    group.add_argument(
        "--host", default="127.0.0.1", help="address the API and dashboard listen on"
    )
    group.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="port the API and dashboard listen on (0: any free one); written to"
        f" --data-dir/{URL_FILE}, where the client commands find it",
    )
    group.add_argument(
        "--no-user-config",
        dest="user_config",
        action="store_false",
        help="do not write the URL and the admin token's file into this user's"
        " $XDG_CONFIG_HOME/ilucid/client.toml (default: write them, so the client"
        " commands find this service from any directory)",
    )
    group.add_argument(
        "--metrics-public",
        action="store_true",
        help="serve /metrics without a token, for a scraper on a trusted network"
        " (default: an admin token is needed: it shows every tenant's counts)",
    )


def _add_policy_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--policy",
        default="ilucid",
        help="scheduling profile (ilucid, the default profile; `ilucid policies` lists them)"
        " or a profile file (*.toml, docs/profiles.md)",
    )
    group.add_argument(
        "--tiers",
        type=Path,
        default=None,
        help="ilucid or tiered: TOML file of the training reserve and tenant quotas"
        " (docs/tiers.md; default: none, the built-in settings)",
    )
    group.add_argument("--interval", type=float, default=2.0, help="reconcile every N s")
    group.add_argument(
        "--grace", type=float, default=30.0, help="seconds from the stop signal to SIGKILL"
    )
    group.add_argument("--stop-signal", default="TERM", help="signal that asks a job to stop")
    group.add_argument(
        "--max-retries",
        type=int,
        default=3,  # retries.DEFAULT_MAX_RETRIES (not imported: the CLI starts light)
        help="retries of a job whose launch failed or whose process vanished, after 10 s,"
        " 20 s, 40 s...; then it fails (default: 3; a job's own --max-retries wins;"
        " preemptions never count)",
    )
    group.add_argument(
        "--profiler-gpus",
        type=int,
        default=0,
        help="GPUs set apart as a node the lucid policy may profile new jobs on",
    )
    group.add_argument(
        "--profile-limit",
        type=float,
        default=300.0,
        help="profiling run length of a new job, s (ilucid and lucid, with a metrics source)",
    )
    group.add_argument(
        "--metrics",
        default="auto",
        help="live profiling source: auto (NVML when GPUs were found through it), nvml,"
        " none, or a CSV of recorded samples (gpu_util,mem_util,mem_mib) to replay",
    )
    group.add_argument(
        "--packing-model",
        type=Path,
        help="lucid: a packing analyzer from `ilucid model train packing`"
        " (default: a stated rule on GPU utilisation)",
    )


def _add_model_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--refit-every",
        type=int,
        default=20,
        help="refit the duration model after every N finished jobs",
    )
    group.add_argument(
        "--refit-interval",
        type=float,
        default=0.0,
        help="also refit every S seconds when jobs finished since the last refit (0: off)",
    )
    group.add_argument(
        "--model-min-jobs",
        type=int,
        default=30,
        help="finished jobs before the duration model is used; until then, medians",
    )
    group.add_argument(
        "--workers",
        metavar="ADDRESS",
        help="run duration-model refits on the workers of this Dask scheduler, e.g."
        " tcp://10.0.0.5:8786; they must reach the database and the data folder"
        " (default: one local worker process)",
    )


def _add_backend_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--backend",
        choices=["local", "slurm", "kubernetes", "hollow"],
        default="local",
        help="local: jobs as processes on this host; slurm: held sbatch jobs released by"
        " ilucid; kubernetes: suspended Jobs un-suspended by ilucid; hollow: BENCHMARKS"
        " ONLY, nodes that exist in memory and jobs that run no command (bench/service_scale.py)",
    )
    group.add_argument(
        "--hollow-nodes",
        type=_whole,
        default=1000,
        help="hollow backend (benchmarks only): how many nodes",
    )
    group.add_argument(
        "--hollow-gpus-per-node",
        type=_whole,
        default=8,
        help="hollow backend (benchmarks only): GPUs on each node",
    )
    group.add_argument(
        "--hollow-durations",
        metavar="TRACE",
        help="hollow backend (benchmarks only): a trace (name or file) whose job durations"
        " each job's run time is drawn from (default: log-normal)",
    )
    group.add_argument(
        "--hollow-found-running",
        action="store_true",
        help="hollow backend (benchmarks only): the jobs the first pass starts are taken as"
        " found mid-run, so jobs end at the steady rate from the start",
    )
    group.add_argument(
        "--hollow-mean-s",
        type=_positive,
        default=200.0,
        help="hollow backend (benchmarks only): the drawn run times are scaled to this mean",
    )
    group.add_argument(
        "--dynamic-uids",
        default="61184-65519",
        metavar="FIRST-LAST",
        help="local backend as root: each user whose token maps to no Unix account runs"
        " jobs as a uid of its own from this range, never shared (none: refuse such"
        " users' jobs; jobs never run as root)",
    )
    group.add_argument(
        "--max-log-mb",
        type=_positive,
        default=100.0,
        help="local backend: the most MB kept of each job's stdout and of its stderr; past"
        " it a log keeps its head and a rolling tail, and notes the cut",
    )
    group.add_argument(
        "--log-retention-days",
        type=_positive,
        default=30.0,
        help="local backend: logs of ended jobs are removed this many days after their last output",
    )
    group.add_argument(
        "--slurm-partition", help="slurm: the partition ilucid schedules (default: all)"
    )
    group.add_argument("--slurm-conf", help="slurm: path of slurm.conf (default: Slurm's)")
    group.add_argument(
        "--kube-url",
        help="kubernetes: API server URL (default: in-cluster config, else ~/.kube/config)",
    )
    group.add_argument(
        "--kube-namespace", help="kubernetes: watch only this namespace (default: all)"
    )
    group.add_argument(
        "--kube-queue-label",
        default=os.environ.get("ILUCID_QUEUE_LABEL", "ilucid.io/queue"),
        help="kubernetes: only Jobs with this label are scheduled (ILUCID_QUEUE_LABEL)",
    )
    group.add_argument(
        "--kube-pool",
        action="append",
        default=[],
        metavar="NAME:NODES:GPUS_PER_NODE:GPU_TYPE[:CLASS]",
        help="kubernetes: a node group cluster-autoscaler brings up on a ProvisioningRequest"
        " (CLASS, default best-effort-atomic-scale-up.autoscaling.x-k8s.io); its nodes carry"
        " the label ilucid.io/pool=NAME; repeat for more pools (docs/kubernetes.md)",
    )
    group.add_argument(
        "--lease",
        default="ilucid-system/ilucid-leader",
        help="kubernetes: NAMESPACE/NAME of the leader-election Lease",
    )
    group.add_argument(
        "--lease-duration", type=float, default=15.0, help="kubernetes: lease duration, s"
    )

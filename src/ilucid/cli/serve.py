"""``ilucid serve`` and the commands run on the service's own host: ``token`` and
``slurm-release-held``. The commands that talk to a running service are in
:mod:`ilucid.cli.client`.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ilucid.cli.common import DEFAULT_DATA, Command, add_commands
from ilucid.core.policies import BuildOptions, ProfileEntry, register_profile
from ilucid.core.scheduler import Policy
from ilucid.settings.profile_file import is_profile_file, load_profile

__all__ = ["COMMANDS", "add_service_commands"]


def _add_serve(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="state (.ilucid)")
    serve.add_argument("--db", help="database URL (default: SQLite in --data-dir)")
    serve.add_argument(
        "--gpus", type=int, default=None, help="virtual GPUs (default: NVML's, else 1)"
    )
    serve.add_argument(
        "--policy",
        default="ilucid",
        help="scheduling profile (ilucid, the default profile; `ilucid policies` lists them)"
        " or a profile file (*.toml, docs/profiles.md)",
    )
    serve.add_argument(
        "--tiers",
        type=Path,
        default=None,
        help="ilucid or tiered: TOML file of the training reserve and tenant quotas"
        " (docs/tiers.md)",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8787)
    serve.add_argument(
        "--metrics-public",
        action="store_true",
        help="serve /metrics without a token, for a scraper on a trusted network"
        " (default: an admin token is needed: it shows every tenant's counts)",
    )
    serve.add_argument("--interval", type=float, default=2.0, help="reconcile every N s (2)")
    serve.add_argument("--grace", type=float, default=30.0, help="stop signal to SIGKILL, s")
    serve.add_argument("--stop-signal", default="TERM", help="signal that asks a job to stop")
    serve.add_argument(
        "--metrics",
        default="auto",
        help="live profiling source: auto (NVML when GPUs were found through it), nvml,"
        " none, or a CSV of recorded samples (gpu_util,mem_util,mem_mib) to replay",
    )
    serve.add_argument(
        "--backend",
        choices=["local", "slurm", "kubernetes"],
        default="local",
        help="local: jobs as processes on this host; slurm: held sbatch jobs released by ilucid",
    )
    serve.add_argument("--slurm-partition", help="slurm: the partition ilucid schedules")
    serve.add_argument(
        "--kube-url",
        help="kubernetes: API server URL (default: in-cluster config, else ~/.kube/config)",
    )
    serve.add_argument("--kube-namespace", help="kubernetes: watch only this namespace")
    serve.add_argument(
        "--kube-queue-label",
        default=os.environ.get("ILUCID_QUEUE_LABEL", "ilucid.io/queue"),
        help="kubernetes: only Jobs with this label are scheduled (ilucid.io/queue)",
    )
    serve.add_argument(
        "--lease",
        default="ilucid-system/ilucid-leader",
        help="kubernetes: NAMESPACE/NAME of the leader-election Lease",
    )
    serve.add_argument(
        "--lease-duration", type=float, default=15.0, help="kubernetes: lease duration, s (15)"
    )
    serve.add_argument("--slurm-conf", help="slurm: path of slurm.conf (default: Slurm's)")
    serve.add_argument(
        "--profiler-gpus",
        type=int,
        default=0,
        help="GPUs set apart as a node the lucid policy may profile new jobs on (0)",
    )
    serve.add_argument(
        "--profile-limit",
        type=float,
        default=300.0,
        help="profiling run length of a new job, s (300; ilucid and lucid, with a metrics source)",
    )
    serve.add_argument(
        "--packing-model",
        type=Path,
        help="lucid: a packing analyzer from `ilucid model train packing`"
        " (default: a stated rule on GPU utilisation)",
    )
    serve.add_argument(
        "--refit-every",
        type=int,
        default=20,
        help="refit the duration model after every N finished jobs (20)",
    )
    serve.add_argument(
        "--refit-interval",
        type=float,
        default=0.0,
        help="also refit every S seconds when jobs finished since the last refit (0: off)",
    )
    serve.add_argument(
        "--job-user",
        default="nobody",
        help="local backend as root: the Unix account jobs run as when their token maps to"
        " none (nobody); jobs never run as root",
    )
    serve.add_argument(
        "--model-min-jobs",
        type=int,
        default=30,
        help="finished jobs before the duration model is used; until then, medians (30)",
    )


def _add_release_held(fail_open: argparse.ArgumentParser) -> None:
    fail_open.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    fail_open.add_argument("--slurm-conf", help="path of slurm.conf (default: Slurm's)")
    fail_open.add_argument(
        "--if-idle-for",
        type=float,
        default=0.0,
        help="only when the service has not completed a pass for this many seconds"
        " (for a timer: a live service is left alone)",
    )


def _add_token(token: argparse.ArgumentParser) -> None:
    token.add_argument(
        "action",
        choices=["create", "revoke"],
        help="create: a new token; revoke: delete every token of --user (at once)",
    )
    token.add_argument("--user", required=True, help="the ilucid user the token speaks for")
    token.add_argument("--tenant", help="the user's team (create: required; revoke: only it)")
    token.add_argument("--admin", action="store_true", help="may see and act on every job")
    token.add_argument(
        "--unix-user",
        help="create: the Unix account this token's jobs run as when the service is root"
        " (default: serve's --job-user)",
    )
    token.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    token.add_argument("--db", help="database URL (default: SQLite in --data-dir)")


def _private_data_dir(folder: Path) -> None:
    """The data directory is the service's alone (0700): jobs and other users can read
    neither the database, the admin token nor anyone's job logs. Files created in it
    from now on are 0600 (umask 077)."""
    os.umask(0o077)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    for name in ("ilucid.db", "ilucid.db-wal", "ilucid.db-shm", "admin.token"):
        path = folder / name
        if path.exists():
            path.chmod(0o600)


def _db_url(args: argparse.Namespace) -> str:
    if args.db:
        return str(args.db)
    _private_data_dir(args.data_dir)
    return f"sqlite:///{args.data_dir.resolve() / 'ilucid.db'}"


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ilucid.backends.local import LocalBackend, discover_gpus
    from ilucid.service.api import build_app
    from ilucid.service.auth import create_token
    from ilucid.service.db import TokenRow, make_engine, migrate
    from ilucid.service.live_policies import LIVE_POLICIES, TIER_PROFILES, live_policy_factory
    from ilucid.service.scheduler_service import SchedulerService

    site = None
    if is_profile_file(args.policy):  # a site's own profile: read, registered, run by name
        site = load_profile(args.policy)
        register_profile(site)
        args.policy = site.profile.name
    elif args.policy not in LIVE_POLICIES:
        raise ValueError(
            f"--policy must be one of {', '.join(LIVE_POLICIES)}, or a profile file (*.toml)"
        )
    tiers = None
    if args.tiers is not None:  # read before anything starts: a bad file stops here
        from ilucid.settings.tier_settings import load_tier_config

        if args.policy not in TIER_PROFILES:
            raise ValueError(
                f"--tiers configures the {' and '.join(TIER_PROFILES)} profiles,"
                f" not {args.policy!r}"
            )
        tiers = load_tier_config(args.tiers)
    stop_signal = getattr(signal, f"SIG{args.stop_signal.upper().removeprefix('SIG')}", None)
    if stop_signal is None:
        raise ValueError(f"unknown signal {args.stop_signal!r}")
    url = _db_url(args)
    migrate(url)
    # private also with --db (admin.token lives here), and the database file just made
    _private_data_dir(args.data_dir)
    engine = make_engine(url)
    from sqlalchemy.orm import Session

    with Session(engine) as session:
        has_tokens = session.query(TokenRow).count() > 0
    args.data_dir.mkdir(parents=True, exist_ok=True)
    if not has_tokens:
        token = create_token(engine, "admin", "admin", admin=True)
        path = args.data_dir / "admin.token"
        path.write_text(token + "\n", encoding="utf-8")
        path.chmod(0o600)
        print(f"created the admin token in {path} (export ILUCID_TOKEN=$(cat {path}))")
    packing = None
    if args.packing_model is not None:
        from ilucid.estimators.duration import load_estimator
        from ilucid.estimators.packing import PackingAnalyzer

        packing = load_estimator(args.packing_model)
        if not isinstance(packing, PackingAnalyzer):
            raise ValueError(f"--packing-model {args.packing_model}: not a packing analyzer")
    gpus = discover_gpus(args.gpus)
    backend: Any
    gate = None
    if args.backend == "kubernetes":
        backend, gate = _kubernetes(args)
    elif args.backend == "slurm":
        from ilucid.backends.slurm import SlurmBackend

        backend = SlurmBackend(args.data_dir, args.slurm_partition, args.slurm_conf)
        backend.observe()  # fails here, with Slurm's message, if Slurm cannot be reached
    else:
        backend = LocalBackend(
            args.data_dir,
            gpus,
            stop_signal=stop_signal,
            grace_s=args.grace,
            profiler_gpus=args.profiler_gpus,
            job_user=args.job_user,
        )
    from ilucid.service.duration_keeper import DurationKeeper

    durations = DurationKeeper(
        args.data_dir.resolve() / "models",
        min_jobs=args.model_min_jobs,
        refit_every=args.refit_every,
        refit_interval_s=args.refit_interval,
    )
    metrics = _metrics_source(args.metrics, gpus.source)
    factory = live_policy_factory(args.profile_limit, tiers, profiling=metrics is not None)
    service = SchedulerService(
        engine,
        backend,
        policy=args.policy,
        metrics=metrics,
        policy_factory=_with_site(factory, site),
        packing=packing,
        packing_source=str(args.packing_model or ""),
        durations=durations,
    )
    where = (
        f"Slurm ({service.cluster.total_gpus} GPUs on {len(service.cluster.nodes)} nodes)"
        if args.backend == "slurm"
        else f"{gpus.count} {gpus.source} GPU(s) of type {gpus.gpu_type}"
    )
    print(
        f"ilucid serve: {where}, policy {args.policy}, state in {url},"
        f" API on http://{args.host}:{args.port}"
    )
    if args.backend == "local":
        print(
            f"jobs run as their token's Unix user, else as {args.job_user}"
            if backend.switches_users
            else "jobs run as this service's own user (not root: it cannot switch users);"
            " run it as root to run each job as its owner's account (README: Security)"
        )
    # the token itself never goes to the log: the operator reads it from its 0600 file
    token_file = args.data_dir / "admin.token"
    print(
        f"dashboard: http://{args.host}:{args.port}/ (sign in with the admin token in"
        f" {token_file}, or open http://{args.host}:{args.port}/#token=$(cat {token_file}))",
        flush=True,
    )
    stop = threading.Event()
    beat = args.data_dir / "heartbeat"  # for `ilucid slurm-release-held --if-idle-for`
    loop = threading.Thread(
        target=service.run, args=(args.interval, stop, beat.touch, gate), daemon=True
    )
    loop.start()
    try:
        uvicorn.run(
            build_app(service, metrics_public=args.metrics_public),
            host=args.host,
            port=args.port,
            log_level="warning",
        )
    finally:
        stop.set()
        service.wake.set()
        loop.join(timeout=5)
        durations.close()
    return 0


def _with_site(
    factory: Callable[[str], Policy], site: ProfileEntry | None
) -> Callable[[str], Policy]:
    """``factory``, which also builds the site's profile from ``--policy FILE.toml``."""
    if site is None:
        return factory
    name = site.profile.name
    live = BuildOptions(live=True)
    return lambda policy: site.build(live) if policy == name else factory(policy)


def _kubernetes(args: argparse.Namespace) -> tuple[Any, Any]:
    """The Kubernetes backend and its leader-election gate (this replica's Lease)."""
    import socket

    from kubernetes import client, config

    from ilucid.backends.kubernetes import KubernetesBackend, LeaseElector

    if args.kube_url:
        configuration = client.Configuration(host=args.kube_url)
    else:
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config()  # type: ignore[no-untyped-call]
        configuration = client.Configuration.get_default_copy()
    api = client.ApiClient(configuration)
    namespace, _, name = args.lease.partition("/")
    if not name:
        raise ValueError(f"--lease {args.lease!r}: give NAMESPACE/NAME")
    identity = os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
    elector = LeaseElector(api, namespace, name, identity, args.lease_duration)
    api.user_agent = "ilucid"
    backend = KubernetesBackend(api, args.kube_namespace, args.kube_queue_label)
    return backend, elector.try_lead


def _metrics_source(choice: str, gpu_source: str) -> Any:
    from ilucid.backends.metrics import NvmlMetrics, ReplayMetrics

    if choice == "none" or (choice == "auto" and gpu_source != "nvml"):
        return None
    if choice in ("auto", "nvml"):
        return NvmlMetrics()
    path = Path(choice)
    if not path.exists():
        raise ValueError(f"--metrics: {choice!r} is not auto, nvml, none or a samples CSV")
    return ReplayMetrics.from_csv(path)


def _release_held(args: argparse.Namespace) -> int:
    """Fail-open for a stopped service: its held jobs go to Slurm's own scheduler (with
    the GPU count they asked for, untyped). Run by hand or from a timer."""
    import time

    from ilucid.backends.slurm import SlurmBackend

    beat = args.data_dir / "heartbeat"
    if args.if_idle_for > 0 and beat.exists():
        idle = time.time() - beat.stat().st_mtime
        if idle < args.if_idle_for:
            print(f"the service completed a pass {idle:.0f} s ago: nothing released")
            return 0
    released = SlurmBackend(args.data_dir, slurm_conf=args.slurm_conf).release_all_held()
    print(f"released {len(released)} held job(s) to Slurm: {' '.join(map(str, released))}")
    return 0


def _token(args: argparse.Namespace) -> int:
    from ilucid.service.auth import create_token
    from ilucid.service.db import make_engine, migrate

    url = _db_url(args)
    migrate(url)
    engine = make_engine(url)
    if args.action == "revoke":
        from ilucid.service.auth import revoke_tokens

        gone = revoke_tokens(engine, args.user, args.tenant)
        print(f"revoked {gone} token(s) of {args.user}: they are refused from now on")
        return 0 if gone else 1
    if not args.tenant:
        raise ValueError("token create needs --tenant")
    print(create_token(engine, args.user, args.tenant, args.admin, args.unix_user))
    return 0


COMMANDS = (
    Command("serve", "run the live scheduler on this host (local backend)", _add_serve, _serve),
    Command(
        "slurm-release-held",
        "fail-open: hand every job ilucid holds in Slurm to Slurm's own scheduler",
        _add_release_held,
        _release_held,
    ),
    Command(
        "token",
        "create an API token (printed once), or revoke a user's tokens",
        _add_token,
        _token,
    ),
)


def add_service_commands(sub: Any) -> None:
    """``serve``, ``slurm-release-held`` and ``token`` on ``sub`` (an ``add_subparsers()``
    action): how a deployment's command line is checked against this parser."""
    add_commands(sub, COMMANDS)

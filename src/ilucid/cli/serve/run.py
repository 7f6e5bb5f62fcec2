"""``ilucid serve``: check the settings, open the database, build the service, serve
the API and dashboard until SIGINT or SIGTERM, and say what is left running.

Stopping never stops jobs: the local backend runs each in its own session (a
terminal's Ctrl-C does not reach them), Slurm and Kubernetes run theirs anyway, and
the next start re-adopts every job still running (it says which).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ilucid.cli.common import URL_FILE, CliError
from ilucid.cli.serve.host import db_url, migrate_or_refuse, private_data_dir
from ilucid.cli.serve.log_setup import configure_from
from ilucid.cli.serve.options import DEFAULT_VIRTUAL_GPUS
from ilucid.cli.user_config import user_config_path, write_user_config
from ilucid.core import Profile
from ilucid.core.policies import live_profiles, register_profile
from ilucid.service.job_accounts import parse_uid_range
from ilucid.settings.profile_file import is_profile_file, load_profile

__all__ = ["serve"]

logger = logging.getLogger(__name__)


def serve(args: argparse.Namespace) -> int:
    """Check the settings, open the database, build the service, then serve until a
    signal stops it (running jobs keep running: the next start re-adopts them)."""
    configure_from(args)  # first: a bad --log-level stops here, and all that follows logs
    try:
        return _serve(args)
    except (CliError, ValueError, OSError) as exc:
        if args.log_format != "json":
            raise  # the CLI's one line on stderr, as every command's
        # a collector reading JSON lines sees why the service stopped as one of them
        logger.error("ilucid: error: %s", exc)
        return 2


def _serve(args: argparse.Namespace) -> int:
    """:func:`serve`'s work, once its log is set up."""
    from sqlalchemy.engine import make_url

    # absolute from here on: what the runner, a job and a restart read must not depend
    # on the directory the service was started in
    args.data_dir = Path(args.data_dir).expanduser().resolve()
    parse_uid_range(args.dynamic_uids)  # a bad range stops here, before anything starts
    site, tiers = _read_policy(args)
    cloud = _read_cloud(args)
    stop_signal = _signal_number(args.stop_signal)
    packing = _packing_model(args.packing_model)
    url, engine = _open_database(args)
    gpus = _gpu_inventory(args.gpus)
    backend, gate = _backend(args, gpus, stop_signal)
    service, durations = _service(args, engine, backend, gpus, site, tiers, packing, cloud)
    on_nodes = f"{service.cluster.total_gpus} GPUs on {len(service.cluster.nodes)} nodes"
    where = {
        "slurm": f"Slurm ({on_nodes})",
        "hollow": f"HOLLOW nodes for benchmarks, no job runs ({on_nodes})",
    }.get(args.backend, f"{gpus.count} {gpus.source} GPU(s) of type {gpus.gpu_type}")
    shown = make_url(url).render_as_string(hide_password=True)  # never a password
    logger.info("ilucid serve: %s, policy %s, state in %s", where, args.policy, shown)
    if args.backend == "local":
        logger.info("%s", _who_runs_jobs(backend, args.dynamic_uids))
        for line in backend.describe_isolation():
            logger.info("%s", line)
    if service.readopted:
        ids = ", ".join(service.readopted)
        logger.info("re-adopted %s (%s)", _count(len(service.readopted), "running job"), ids)
    outcome = service.restart_outcome.sentence()
    if outcome is not None and (service.restart_outcome.ended or service.restart_outcome.requeued):
        logger.info("%s", outcome)  # every job the stop listed, by what became of it
    try:
        _serve_until_stopped(args, service, gate)
    finally:
        durations.close()
    _say_stopping(engine)
    return 0


def _who_runs_jobs(backend: Any, dynamic_uids: str) -> str:
    if not backend.switches_users:
        return (
            "jobs run as this service's own user (not root: it cannot switch users);"
            " run it as root to run each job as its owner's account (README: Security)"
        )
    if dynamic_uids.strip().lower() == "none":
        return (
            "jobs run as their token's Unix account; users without one are refused"
            " (--dynamic-uids none)"
        )
    return (
        "jobs run as their token's Unix account, else as a uid of their user's own"
        f" from {dynamic_uids} (never shared, never root)"
    )


def _read_policy(args: argparse.Namespace) -> tuple[Profile | None, Any]:
    """The site's profile file (registered, ``args.policy`` set to its name) or a live
    profile's name, and the ``--tiers`` file; read before anything starts, so a bad
    file stops here."""
    from ilucid.service.live_policies import TIER_PROFILES

    site = None
    if is_profile_file(args.policy):
        site = load_profile(args.policy)
        register_profile(site)
        args.policy = site.name
    if args.policy not in live_profiles():
        raise ValueError(
            f"--policy must be one of {', '.join(live_profiles())}, or a profile file (*.toml)"
        )
    if args.tiers is None:
        return site, None
    from ilucid.settings.tier_settings import load_tier_config

    if args.policy not in TIER_PROFILES:
        raise ValueError(
            f"--tiers configures the {' and '.join(TIER_PROFILES)} profiles, not {args.policy!r}"
        )
    return site, load_tier_config(args.tiers)


def _read_cloud(args: argparse.Namespace) -> Any:
    """The paid pools and tenants' budgets of the ``--tiers`` file (docs/hybrid.md), as
    the core's settings; None without them."""
    from ilucid.core import SchedulerConfig
    from ilucid.settings.cloud_settings import CloudSettings, load_cloud_settings

    cloud = load_cloud_settings(args.tiers) if args.tiers is not None else CloudSettings()
    kube_pools = [text.split(":", 1)[0] for text in args.kube_pool]
    for name in kube_pools:
        if name not in cloud.pools:
            raise ValueError(
                f"--kube-pool {name}: give its price in the --tiers file ([pools.{name}]"
                " price_per_gpu_hour = ...; docs/hybrid.md)"
            )
    if not cloud.pools:
        return None
    for pool in cloud.pools.values():
        logger.info(
            "ilucid serve: pool %s at %g/GPU-h, %g s start-up, released after %g s idle%s",
            pool.name,
            pool.cost_per_gpu_hour,
            pool.startup_s,
            pool.idle_release_s,
            ""
            if cloud.value_of_wait is None
            else f"; waiting valued at {cloud.value_of_wait:g}/GPU-h",
        )
    return SchedulerConfig(
        pools=cloud.pools, value_of_wait=cloud.value_of_wait, budgets=cloud.budgets
    )


def _signal_number(name: str) -> int:
    """``TERM``, ``SIGTERM`` or ``term``: the signal's number."""
    try:
        return int(signal.Signals[f"SIG{name.upper().removeprefix('SIG')}"])
    except KeyError:
        raise ValueError(f"--stop-signal: unknown signal {name!r}") from None


def _packing_model(path: Path | None) -> Any:
    if path is None:
        return None
    from ilucid.estimators.duration import load_estimator
    from ilucid.estimators.packing import PackingAnalyzer

    packing = load_estimator(path)
    if not isinstance(packing, PackingAnalyzer):
        raise ValueError(f"--packing-model {path}: not a packing analyzer")
    return packing


def _open_database(args: argparse.Namespace) -> tuple[str, Any]:
    """The database, migrated, and the data directory, private; the first start writes
    an admin token into the data directory (never to the log)."""
    from sqlalchemy.orm import Session

    from ilucid.service.auth import create_token
    from ilucid.service.db import TokenRow, make_engine

    url = db_url(args)
    migrate_or_refuse(url)
    # private also with --db (admin.token lives here), and the database file just made
    private_data_dir(args.data_dir)
    engine = make_engine(url)
    with Session(engine) as session:
        has_tokens = session.query(TokenRow).count() > 0
    if not has_tokens:
        token = create_token(engine, "admin", "admin", admin=True)
        path = args.data_dir / "admin.token"
        path.write_text(token + "\n", encoding="utf-8")
        path.chmod(0o600)
        logger.info("created the admin token in %s (export ILUCID_TOKEN=$(cat %s))", path, path)
    return url, engine


def _gpu_inventory(count: int | None) -> Any:
    """``count`` virtual GPUs; without it NVML's, else :data:`DEFAULT_VIRTUAL_GPUS`."""
    from ilucid.backends.local_host import discover_gpus

    if count is not None:
        return discover_gpus(count)
    found = discover_gpus(None)
    return found if found.source == "nvml" else discover_gpus(DEFAULT_VIRTUAL_GPUS)


def _backend(args: argparse.Namespace, gpus: Any, stop_signal: int) -> tuple[Any, Any]:
    """The backend ``--backend`` names, and its leader gate (Kubernetes only)."""
    if args.backend == "kubernetes":
        return _kubernetes(args)
    if args.backend == "slurm":
        from ilucid.backends.slurm import SlurmBackend

        slurm = SlurmBackend(args.data_dir, args.slurm_partition, args.slurm_conf)
        slurm.observe()  # fails here, with Slurm's message, if Slurm cannot be reached
        return slurm, None
    if args.backend == "hollow":
        return _hollow(args), None
    from ilucid.backends.local import LocalBackend

    local = LocalBackend(
        args.data_dir,
        gpus,
        stop_signal=stop_signal,
        grace_s=args.grace,
        profiler_gpus=args.profiler_gpus,
        max_log_mb=args.max_log_mb,
        log_retention_days=args.log_retention_days,
    )
    return local, None


def _hollow(args: argparse.Namespace) -> Any:
    """Hollow nodes (benchmarks only), whose jobs end after run times drawn from a trace."""
    from ilucid.backends.hollow import HollowBackend, HollowDurations

    durations = (
        HollowDurations.from_trace(args.hollow_durations, args.hollow_mean_s)
        if args.hollow_durations
        else HollowDurations.lognormal(args.hollow_mean_s)
    )
    logger.warning(
        "ilucid serve: the hollow backend is for benchmarks only: its %d nodes exist in"
        " memory and its jobs run no command",
        args.hollow_nodes,
    )
    return HollowBackend(
        args.hollow_nodes,
        args.hollow_gpus_per_node,
        durations,
        found_running=args.hollow_found_running,
        pass_interval_s=args.interval,
    )


def _service(
    args: argparse.Namespace,
    engine: Any,
    backend: Any,
    gpus: Any,
    site: Profile | None,
    tiers: Any,
    packing: Any,
    config: Any = None,
) -> tuple[Any, Any]:
    """The scheduler service (it re-adopts running jobs as it starts) and its duration
    model keeper, whose worker process must be closed on the way out."""
    from ilucid.service.duration_keeper import DurationKeeper
    from ilucid.service.live_policies import live_policy_factory
    from ilucid.service.scheduler_service import SchedulerService

    durations = DurationKeeper(
        args.data_dir.resolve() / "models",
        min_jobs=args.model_min_jobs,
        refit_every=args.refit_every,
        refit_interval_s=args.refit_interval,
        workers=args.workers,
    )
    metrics = _metrics_source(args.metrics, gpus.source)
    factory = live_policy_factory(args.profile_limit, tiers, profiling=metrics is not None)
    try:
        service = SchedulerService(
            engine,
            backend,
            policy=args.policy,
            metrics=metrics,
            policy_factory=factory,
            packing=packing,
            packing_source=str(args.packing_model or ""),
            durations=durations,
            max_retries=args.max_retries,
            dynamic_uids=parse_uid_range(args.dynamic_uids),
            config=config,
        )
    except BaseException:
        durations.close()
        raise
    return service, durations


def _client_url(host: str, port: int) -> str:
    """The URL a client on this host reaches ``host:port`` at."""
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _write_user_config(url: str, token_file: Path) -> None:
    """This user's client settings name this service, so the client commands find it
    from any directory; never the token itself, never into another user's home."""
    try:
        written = write_user_config(url, token_file)
    except (OSError, ValueError) as exc:  # a read-only home, a hand-broken file
        logger.warning("client settings not written: %s", exc)
        return
    if written is None:
        logger.warning(
            "client settings not written: %s belongs to another user", user_config_path().parent
        )
    else:
        logger.info("client settings: %s names %s and its admin token's file", written, url)


def _serve_until_stopped(args: argparse.Namespace, service: Any, gate: Any) -> None:
    """The reconcile loop in a thread, the API in this one, until SIGINT or SIGTERM.

    Once it listens, the URL goes to ``--data-dir/url`` and this user's client settings
    (where client commands find it) and the dashboard's address is printed (never the
    token itself)."""
    import uvicorn

    from ilucid.service.api import build_app

    token_file = args.data_dir / "admin.token"

    def listening(port: int) -> None:
        url = _client_url(args.host, port)
        with contextlib.suppress(OSError):  # a read-only data directory: no URL file
            (args.data_dir / URL_FILE).write_text(url + "\n", encoding="utf-8")
        if args.user_config:
            _write_user_config(url, token_file)
        logger.info(
            "API on %s; dashboard: %s/ (sign in with the admin token in %s, or open"
            " %s/#token=$(cat %s))",
            url,
            url,
            token_file,
            url,
            token_file,
        )

    stop = threading.Event()
    beat = args.data_dir / "heartbeat"  # for `ilucid slurm-release-held --if-idle-for`
    loop = threading.Thread(
        target=service.run, args=(args.interval, stop, beat.touch, gate), daemon=True
    )
    loop.start()
    server = None
    try:
        if threading.current_thread() is threading.main_thread():
            # SIGTERM stops the service as Ctrl-C does (uvicorn hands it back once it
            # has shut down); its default would end the process before the loop stops
            signal.signal(signal.SIGTERM, signal.default_int_handler)
        app = build_app(service, metrics_public=args.metrics_public)
        # uvicorn's own reports go through the handler serve set up (log_config=None),
        # warnings and above: its access log would be a line per request
        quiet = max(logging.WARNING, logging.getLogger("ilucid").getEffectiveLevel())
        config = uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_config=None,
            log_level=quiet,
        )
        server = _announcing_server(config, listening)
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        service.wake.set()
        loop.join(timeout=5)
        if server is not None and server.started:  # its lifespan recorded this run
            _record_stop(server.config.app, service)


def _record_stop(app: Any, service: Any) -> None:
    """The clean stop's time, once nothing of the service runs (the down period starts
    there); a database that fails now costs only that precision: say so, stop anyway."""
    from ilucid.service.uptime import record_stop

    try:
        record_stop(app, service.clock())
    except Exception as exc:
        logger.warning("ilucid serve: recording the stop time failed: %r", exc)


def _announcing_server(config: Any, listening: Callable[[int], None]) -> Any:
    """uvicorn's server, which calls ``listening(port)`` once its socket is bound."""
    import uvicorn

    class AnnouncingServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                bound = self.servers[0].sockets[0].getsockname()
                listening(int(bound[1]))

    return AnnouncingServer(config)


def _say_stopping(engine: Any) -> None:
    """What stopping leaves behind: running jobs keep running (the local backend runs
    each in its own session, Slurm and Kubernetes run them anyway) and the next start
    re-adopts them; pending jobs stay queued in the database."""
    from sqlalchemy import func, select
    from sqlalchemy.orm import Session

    from ilucid.service.db import JobRow
    from ilucid.service.lifecycle import Phase

    with Session(engine) as session:
        running = session.scalars(
            select(JobRow.id).where(JobRow.state == Phase.RUNNING.value).order_by(JobRow.id)
        ).all()
        pending = session.scalar(
            select(func.count()).select_from(JobRow).where(JobRow.state == Phase.PENDING.value)
        )
    said = (
        f"stopping: {_count(len(running), 'job')} {'keeps' if len(running) == 1 else 'keep'}"
        f" running and will be re-adopted at the next start ({', '.join(running)})"
        if running
        else "stopping: no job is running"
    )
    if pending:
        said += f"; {_count(pending, 'pending job')} {'stays' if pending == 1 else 'stay'} queued"
    logger.info("%s", said)


def _count(count: int, noun: str) -> str:
    """``1 job``, ``2 jobs``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _kubernetes(args: argparse.Namespace) -> tuple[Any, Any]:
    """The Kubernetes backend and its leader-election gate (this replica's Lease)."""
    from kubernetes import client, config

    from ilucid.backends.kubernetes import KubernetesBackend
    from ilucid.backends.kubernetes_lease import LeaseElector
    from ilucid.backends.kubernetes_provisioning import ProvisionedPool

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
    pools = [ProvisionedPool.parse(text) for text in args.kube_pool]
    backend = KubernetesBackend(api, args.kube_namespace, args.kube_queue_label, pools=pools)
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

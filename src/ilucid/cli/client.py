"""The commands that talk to a running service: ``submit``, ``jobs``, ``queue``,
``nodes``, ``tenants``, ``explain``, ``cancel``, ``logs`` and ``whatif``.

They read the service address from ``--url``, else ``ILUCID_URL``, else the URL
``ilucid serve`` wrote into its data directory (``--data-dir``, .ilucid), else this
user's client settings (``$XDG_CONFIG_HOME/ilucid/client.toml``), else
http://127.0.0.1:8787; the token from ``--token`` or ``ILUCID_TOKEN``, else, on
the service's own host, the admin token ``ilucid serve`` wrote there, else the one
the client settings name.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ilucid.cli.common import (
    Command,
    add_service_options,
    estimate_seconds,
    policy_list,
    printable,
    service_client,
)
from ilucid.cli.progress_cell import progress_cell
from ilucid.cli.tables import print_table, summary_rows
from ilucid.core.start_range import range_words
from ilucid.settings.profile_file import resolve_policies

if TYPE_CHECKING:
    import httpx

    from ilucid.core import Cluster, JobSpec
    from ilucid.service.client import ServiceClient
    from ilucid.service.request_models import SubmitBody
    from ilucid.sim.runner import PolicyRun

__all__ = ["COMMANDS"]

#: what a client command does with the open connection and its arguments
Action = Callable[["httpx.Client", argparse.Namespace], int]


def call_service(client: httpx.Client, method: str, path: str, **kw: Any) -> Any:
    """:func:`ilucid.service.client.call_service`, imported with httpx when a command
    calls the service: every other command is spared their import."""
    from ilucid.service.client import call_service as call

    return call(client, method, path, **kw)


def _command(
    name: str,
    help_text: str,
    action: Action,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> Command:
    """A command with ``--url``, ``--token`` and ``--data-dir`` that runs ``action``
    with a connection to the service."""

    def add(parser: argparse.ArgumentParser) -> None:
        if add_arguments is not None:
            add_arguments(parser)
        add_service_options(parser)

    def run(args: argparse.Namespace) -> int:
        with service_client(args) as client:
            return action(client, args)

    return Command(name, help_text, add, run)


def _when(value: float | None) -> str:
    if value is None:
        return "-"
    delta = value - time.time()
    stamp = time.strftime("%H:%M:%S", time.localtime(value))
    return f"{stamp} (in {delta:,.0f} s)" if delta > 0 else stamp


def _expected(entry: dict[str, Any]) -> str:
    """``16:20:05, in 9 min (likely 4-25 min)``: a queued job's expected start, with the
    80% interval the service calibrated (``-``: none)."""
    median, low, high = (
        entry.get(k) for k in ("expected_start", "expected_start_p10", "expected_start_p90")
    )
    if median is None:
        return "-"
    stamp = time.strftime("%H:%M:%S", time.localtime(median))
    if low is None or high is None:
        return stamp
    return f"{stamp}, {range_words(median, low, high, time.time())}"


def _add_submit(submit: argparse.ArgumentParser) -> None:
    submit.add_argument(
        "--gpus",
        type=int,
        default=None,
        help="GPUs the job needs (0: none; default: 1, a gang's: nodes x gpus-per-node)",
    )
    submit.add_argument(
        "--class",
        dest="job_class",
        default="training",
        choices=["training", "inference", "best-effort"],
        help="training waits its turn; inference starts first and may preempt training;"
        " best-effort only uses idle GPUs",
    )
    submit.add_argument(
        "--estimate",
        type=estimate_seconds,
        help="expected run time, s, at least 1; it counts as much as your past estimates"
        " were right (default: the service's duration model estimates it)",
    )
    submit.add_argument(
        "--checkpoint",
        type=float,
        help="how often the job checkpoints, s: work lost to a preemption"
        " (default: the service's assumption)",
    )
    submit.add_argument(
        "--no-cloud",
        dest="cloud",
        action="store_false",
        help="never burst to a paid cloud pool: wait for on-prem GPUs (docs/hybrid.md)",
    )
    submit.add_argument(
        "--max-retries",
        type=int,
        help="retries, with a backoff of 10 s, 20 s, 40 s..., after a failed launch or a"
        " vanished process (default: the service's, ilucid serve --max-retries)",
    )
    _add_job_model(submit)
    submit.add_argument(
        "--cwd",
        metavar="DIR",
        help="the job's working directory; a relative DIR is taken from here"
        " (default: the current directory, as with sbatch)",
    )
    submit.add_argument(
        "argv", nargs=argparse.REMAINDER, help="-- then the program and its arguments"
    )


def _add_job_model(submit: argparse.ArgumentParser) -> None:
    """What a job may ask for beyond a GPU count (the API's fields of the same names)."""
    model = submit.add_argument_group("what the job needs (all optional)")
    model.add_argument("--name", help="a name shown beside the id (default: none)")
    model.add_argument(
        "--priority", type=int, default=0, help="higher first within a class; above 0: admins"
    )
    model.add_argument("--gpu-type", help="only GPUs of this type, e.g. a100 (default: any)")
    model.add_argument(
        "--prefer",
        type=lambda text: [t for t in text.split(",") if t],
        default=[],
        help="GPU types to try first, best first, e.g. h100,a100 (default: none)",
    )
    model.add_argument(
        "--gpu-memory", type=float, help="GPU memory needed per GPU, GB (default: any)"
    )
    model.add_argument(
        "--nodes",
        type=int,
        help="a gang over this many nodes (with --gpus-per-node)"
        " (default: the placer splits --gpus)",
    )
    model.add_argument(
        "--gpus-per-node", type=int, help="GPUs on each node of the gang (default: none)"
    )
    model.add_argument(
        "--gpu-milli",
        type=int,
        default=1000,
        help="a share of one GPU in thousandths, with --gpus 1 (1000: a whole GPU)",
    )
    model.add_argument(
        "--cpus",
        type=float,
        help="CPU cores on each node used, booked against its free CPUs (default: none stated)",
    )
    model.add_argument(
        "--memory",
        type=float,
        help="memory on each node used, GB, booked against its free memory (default: none stated)",
    )


def _submit(client: httpx.Client, args: argparse.Namespace) -> int:
    command = list(args.argv)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise ValueError("give the command after --, e.g. ilucid submit -- python3 train.py")
    body: dict[str, Any] = {"command": command, "class": args.job_class}
    if args.nodes is None:
        body["gpus"] = 1 if args.gpus is None else args.gpus
    elif args.gpus is not None and args.gpus != args.nodes * (args.gpus_per_node or 0):
        raise ValueError(
            f"--gpus {args.gpus} is not --nodes x --gpus-per-node; leave --gpus out of a gang"
        )
    if args.estimate is not None:
        body["estimate_s"] = args.estimate
    if args.checkpoint:
        body["checkpoint_s"] = args.checkpoint
    if not args.cloud:
        body["cloud"] = False
    asked = {
        "name": args.name,
        "gpu_type": args.gpu_type,
        "gpu_memory_gb": args.gpu_memory,
        "nodes": args.nodes,
        "gpus_per_node": args.gpus_per_node,
        "cpus": args.cpus,
        "memory_gb": args.memory,
        "max_retries": args.max_retries,
    }
    body.update({key: value for key, value in asked.items() if value is not None})
    if args.priority:
        body["priority"] = args.priority
    if args.prefer:
        body["preferred_gpu_types"] = args.prefer
    if args.gpu_milli != 1000:
        body["gpu_milli"] = args.gpu_milli
    # the job runs where it was submitted (as with sbatch), or in --cwd, always absolute
    body["cwd"] = os.path.abspath(args.cwd) if args.cwd else os.getcwd()
    print(printable(_service(client).submit(_submission(body)).id))
    return 0


def _submission(body: dict[str, Any]) -> SubmitBody:
    """``body`` checked here as the service checks it: a mistake is named before it
    is sent, in the service's own words."""
    from pydantic import ValidationError

    from ilucid.service.request_models import SubmitBody

    try:
        return SubmitBody.model_validate(body)
    except ValidationError as exc:
        from ilucid.service.edge import validation_sentence

        raise ValueError(validation_sentence(exc.errors())) from None


def _service(client: httpx.Client) -> ServiceClient:
    from ilucid.service.client import ServiceClient

    return ServiceClient(client)


def _jobs(client: httpx.Client, args: argparse.Namespace) -> int:
    rows = [job.model_dump(by_alias=True) for job in _service(client).jobs()]
    # NAME last: scripts read the columns before it by position
    header = ("ID", "USER", "CLASS", "GPUS", "STATE", "ON GPUS", "PROGRESS", "COMMAND", "NAME")
    cells = [
        (
            j["id"],
            j["user"],
            j["class"],
            _gpus_cell(j["gpus"], j.get("gpu_milli", 1000)),
            j["state"],
            # only a running job holds GPUs; an ended one's last GPUs are history
            j["gpu_indices"] if j["state"] == "running" else "",
            progress_cell(j.get("progress")),  # the job's own report, if it made one
            " ".join(j["command"])[:40],
            (j.get("name") or "")[:24],
        )
        for j in rows
    ]
    print_table(header, cells, align="l" * len(header))
    return 0


def _gpus_cell(gpus: int, milli: int) -> str:
    """``0.5`` for a half-GPU share: a share is not a whole GPU."""
    if milli >= 1000 or gpus == 0:
        return str(gpus)
    return f"{gpus * milli / 1000:g}"


#: a reason longer than this is cut (``ilucid explain JOB`` has the whole story)
REASON_CHARS = 70


def _short_reason(reason: str | None) -> str:
    """The service's reason for one queued job, without the position it repeats
    (``pending (position 2 in ilucid order): ``), cut to :data:`REASON_CHARS`; the
    service explains only the queue's head (``-`` beyond it)."""
    if not reason:
        return "-"
    text = reason
    if text.startswith("pending (") and "): " in text:
        text = text.split("): ", 1)[1]
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 3].rstrip() + "..."


def _queue(client: httpx.Client, args: argparse.Namespace) -> int:
    rows = call_service(client, "GET", "/queue")
    cells = [(r["position"], r["id"], _expected(r), _short_reason(r.get("reason"))) for r in rows]
    print_table(("POS", "ID", "EXPECTED START", "WHY IT WAITS"), cells, align="llll")
    return 0


def _free_of(free: float | None, total: float | None, unit: str = "") -> str:
    """``1/2``, ``20.5/23.5 GB``: what jobs may still book of what the node has (``-``:
    the cluster manager does not say, so nothing is booked against it)."""
    if total is None:
        return "-"
    return f"{free if free is not None else total:g}/{total:g}{unit}"


def _nodes(client: httpx.Client, args: argparse.Namespace) -> int:
    rows = call_service(client, "GET", "/nodes")
    cells = [
        (
            n["name"],
            n["gpu_type"],
            n["gpus"],
            n["free_gpus"],
            f"{n['gpu_memory_gb']:g} GB" if n.get("gpu_memory_gb") else "unknown",
            _free_of(n.get("free_cpus"), n.get("cpus")),
            _free_of(n.get("free_memory_gb"), n.get("memory_gb"), " GB"),
            n.get("excluded") or "",
        )
        for n in rows
    ]
    header = ("NODE", "TYPE", "GPUS", "FREE", "GPU MEMORY", "FREE CPUS", "FREE MEMORY")
    print_table((*header, "OUT OF SERVICE"), cells, align="l" * 8)
    return 0


def _money(amount: float | None) -> str:
    """Whole units from 100 on, cents on small sums (as the service's sentences)."""
    if amount is None:
        return "-"
    return f"{amount:,.0f}" if abs(amount) >= 100 else f"{amount:,.2f}"


def _gpu_hours(hours: float) -> str:
    return f"{hours:,.0f}" if hours >= 100 else f"{hours:,.1f}"


def _limits(money: float | None, hours: float | None) -> str:
    """A budget or what is left of it: currency, GPU-hours, both or none (``-``)."""
    said = [_money(money)] if money is not None else []
    said += [f"{_gpu_hours(hours)} GPU-h"] if hours is not None else []
    return "; ".join(said) or "-"


def _cloud_cells(bill: dict[str, Any] | None) -> tuple[str, str, str, str]:
    """CLOUD SPENT, BUDGET, LEFT and FORECAST of a tenant's bill this month (``-``
    without paid pools); the forecast is the service's estimate."""
    if bill is None:
        return "-", "-", "-", "-"
    spent = f"{_money(bill['spent'])} ({_gpu_hours(bill['spent_gpu_hours'])} GPU-h)"
    forecast = _money(bill["forecast"])
    if bill["reaches_budget"]:
        forecast += " (reaches the budget)"
    return (
        spent,
        _limits(bill["budget"], bill["budget_gpu_hours"]),
        _limits(bill["left"], bill["left_gpu_hours"]),
        forecast,
    )


def _pool_line(pool: dict[str, Any]) -> str:
    nodes = (
        f"{pool['nodes_up']} of {pool['nodes']} nodes up"
        if pool["on_demand"]
        else f"{pool['nodes']} nodes, always up"
    )
    return (
        f"pool {printable(pool['pool'])} ({_money(pool['price_per_gpu_hour'])}/GPU-h): {nodes},"
        f" cloud jobs running {pool['running_jobs']}; node time so far"
        f" {_money(pool['node_cost'])} ({_gpu_hours(pool['node_gpu_hours'])} GPU-h, idle nodes"
        " included)"
    )


def _tenants(client: httpx.Client, args: argparse.Namespace) -> int:
    view = call_service(client, "GET", "/views/quotas")
    cells = []
    for t in view["tenants"]:
        quota = t["guaranteed"] if t["configured"] else "-"
        used = "-" if t["used"] is None else t["used"]
        borrowed = "-" if t["borrowed"] is None else t["borrowed"]
        cells.append(
            (quota, used, borrowed, t["holding"], *_cloud_cells(t.get("cloud")), t["tenant"])
        )
    # TENANT last: scripts read the columns before it by position
    header = ("QUOTA", "USED", "BORROWED", "HELD", "CLOUD SPENT", "BUDGET", "LEFT", "FORECAST")
    print_table((*header, "TENANT"), cells, align="rrrrllll" + "l")
    if view["note"]:
        print(printable(view["note"]))
    pools = view.get("pools") or []
    for pool in pools:
        print(_pool_line(pool))
    if pools:
        month = next((t["cloud"]["month"] for t in view["tenants"] if t.get("cloud")), None)
        print(
            f"cloud spending is this month's{f' ({month})' if month else ''}; the forecast"
            " is an estimate: spent plus the running cloud jobs' expected remaining cost"
        )
    else:
        print("no paid pool (serve --tiers FILE with [pools.NAME]): nothing bursts to the cloud")
    return 0


def _add_job(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", help="the job's id, e.g. j000002")


def _explain(client: httpx.Client, args: argparse.Namespace) -> int:
    result = _service(client).explain(args.job).model_dump(by_alias=True)
    print(f"{printable(result['id'])}: {printable(result['why'])}")
    print(f"  {printable(result['estimate']['text'])}")
    if result.get("progress"):
        print(f"  progress: {printable(result['progress'])}")
    if result.get("expected_start"):
        print(f"  expected start: {printable(result['expected_start']['assumes'])}")
    for decision in result["decisions"]:
        print(f"  {_when(decision['time'])}: {printable(decision['message'])}")
    if result.get("story"):
        print("  story, by what caused each move:")
        for cause, lines in _by_stimulus(result["story"]):
            print(f"    {_when(lines[0]['time'])} {printable(cause)}:")
            for line in lines:
                print(f"      {printable(line['text'])}")
    for note in result.get("logs", []):
        print(f"  logs: {printable(note)}")
    return 0


def _by_stimulus(story: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The story's lines in runs that share one stimulus (a request, a pass, an
    observation), as Dask's ``story()`` groups a task's events."""
    groups: list[tuple[str, list[dict[str, Any]]]] = []
    for line in story:
        cause = line.get("stimulus_id") or line.get("stimulus") or "unrecorded"
        if groups and groups[-1][0] == cause:
            groups[-1][1].append(line)
        else:
            groups.append((cause, [line]))
    return groups


def _cancel(client: httpx.Client, args: argparse.Namespace) -> int:
    result = _service(client).cancel(args.job)
    print(f"{printable(result.id)}: {printable(result.state)}")
    return 0


def _add_logs(logs: argparse.ArgumentParser) -> None:
    logs.add_argument("job", help="the job's id, e.g. j000002")
    pick = logs.add_mutually_exclusive_group()
    pick.add_argument(
        "--stdout", action="store_true", help="only its stdout (default: both, labelled)"
    )
    pick.add_argument(
        "--stderr", action="store_true", help="only its stderr (default: both, labelled)"
    )


def _logs(client: httpx.Client, args: argparse.Namespace) -> int:
    """One stream as it is with ``--stdout``/``--stderr``; else both, one after the other,
    each under a ``==> stdout <==`` line (an empty one says so)."""
    picked = "stdout" if args.stdout else "stderr" if args.stderr else None
    for stream in [picked] if picked else ["stdout", "stderr"]:
        text = call_service(client, "GET", f"/jobs/{args.job}/logs?stream={stream}")
        if picked:
            sys.stdout.write(text)
            continue
        sys.stdout.write(f"==> {stream} <==\n")
        if not text:
            sys.stdout.write("(empty)\n")
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _add_whatif(whatif: argparse.ArgumentParser) -> None:
    whatif.add_argument(
        "--policy",
        type=policy_list,
        required=True,
        help="comma-separated profiles or profile files (*.toml) to compare with the"
        " service's current one, e.g. fifo,sjf (replayed here; `ilucid policies` lists them)",
    )
    whatif.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="replay on this Dask cluster's workers (tcp://host:8786), each policy a task;"
        " default: a local process per policy, never in the service's process",
    )


def _whatif(client: httpx.Client, args: argparse.Namespace) -> int:
    """The recorded history replayed here under the service's policy and each of
    ``--policy`` (a profile file is read here)."""
    from ilucid.core import Cluster
    from ilucid.core.policies import is_known
    from ilucid.sim.metrics import summarize
    from ilucid.sim.runner import run_policies
    from ilucid.traces import load_trace

    others = resolve_policies(args.policy)
    current = call_service(client, "GET", "/policy")["policy"]
    if not is_known(current):
        raise ValueError(
            f"the service runs {current!r}, a site profile this command has not read;"
            " replay it with --policy FILE.toml (its profile file)"
        )
    history = call_service(client, "GET", "/history.csv")
    nodes = call_service(client, "GET", "/nodes")
    if history.count("\n") < 2:
        raise ValueError("no finished job recorded yet: nothing to replay")
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as handle:
        handle.write(history)
    try:
        trace = load_trace(handle.name)
    finally:
        os.unlink(handle.name)
    cluster = Cluster.homogeneous(len(nodes), max(n["gpus"] for n in nodes))
    policies = list(dict.fromkeys([current, *others]))  # the current first, each once
    if args.scheduler:
        runs = _replay_on_dask(args.scheduler, trace.jobs, cluster, policies)
    else:
        runs = run_policies(trace.jobs, cluster, policies)
    for run in runs:
        if run.result is None:
            print(f"what-if: {run.name} failed: {printable(run.error)}", file=sys.stderr)
    summaries = [summarize(r.result) for r in runs if r.result is not None]
    print(f"what-if: {len(trace.jobs)} recorded jobs replayed on {len(nodes)} node(s)")
    print_table(*summary_rows(summaries))
    return 0 if all(r.result is not None for r in runs) else 1


def _replay_on_dask(
    address: str, jobs: Sequence[JobSpec], cluster: Cluster, policies: Sequence[str]
) -> list[PolicyRun]:
    """Each policy's replay as a task on the Dask cluster at ``address``."""
    from ilucid.sim.runner import replay_policy
    from ilucid.sweep.engine import open_client

    with open_client(0, address) as client:
        assert client is not None
        futures = [
            client.submit(replay_policy, jobs, cluster, name, pure=False) for name in policies
        ]
        runs: list[PolicyRun] = client.gather(futures)  # type: ignore[no-untyped-call, unused-ignore]
    return runs


COMMANDS = (
    _command(
        "submit", "submit a job: ilucid submit --gpus 2 -- python3 train.py", _submit, _add_submit
    ),
    _command("jobs", "list jobs", _jobs),
    _command("queue", "pending jobs with position and expected start", _queue),
    _command("nodes", "nodes with their free GPUs, CPUs and memory", _nodes),
    _command(
        "tenants",
        "tenants' quota use and cloud spending this month, with paid pools' nodes",
        _tenants,
    ),
    _command("explain", "why a job waits, runs or was preempted", _explain, _add_job),
    _command("cancel", "cancel a job", _cancel, _add_job),
    _command("logs", "a job's output", _logs, _add_logs),
    _command(
        "whatif",
        "replay the recorded history under another policy (admin)",
        _whatif,
        _add_whatif,
    ),
)

"""``ilucid model ...``: train, explain and evaluate the estimators from the command line."""

from __future__ import annotations

import argparse
import math
import time
from functools import partial
from pathlib import Path
from typing import Any

from ilucid.cli.common import (
    Command,
    add_commands,
    add_service_options,
    positive_int,
    printable,
    service_client,
    trace_or_generated,
)
from ilucid.cli.progress import ProgressDisplay
from ilucid.cli.tables import print_table
from ilucid.estimators import load_estimator, make_duration_estimator, walk_forward
from ilucid.estimators.features import walk_forward_rows
from ilucid.estimators.forecast import LoadForecaster, load_series
from ilucid.estimators.packing import PackingAnalyzer
from ilucid.estimators.profiles import load_labelled_profiles, load_lucid_profiles, profile_dir

__all__ = ["COMMANDS"]


def _add_arguments(model: argparse.ArgumentParser) -> None:
    add_commands(model.add_subparsers(dest="verb", required=True), VERBS.values())


def _add_train(train: argparse.ArgumentParser) -> None:
    train.add_argument(
        "kind",
        choices=["duration", "packing", "forecast"],
        help="duration: run times; packing: which jobs share a GPU well; forecast: load",
    )
    train.add_argument(
        "--trace",
        help="duration, forecast: the trace to learn from, a file, a name or 'synthetic'"
        " (default: philly; with no trace folder set, generated data)",
    )
    train.add_argument(
        "--limit",
        type=positive_int,
        help="learn from the first N jobs only (default: all; 5,000 for 'synthetic')",
    )
    train.add_argument("--estimator", default="ebm", help="ebm, user-median or lightgbm")
    train.add_argument("--profiles", type=Path, help="profile folder (default: ILUCID_PROFILE_DIR)")
    train.add_argument(
        "--labelled",
        type=Path,
        help="packing: a CSV of your own labelled profiles (see docs; default: --profiles)",
    )
    train.add_argument("--out", type=Path, required=True, help="model file to write")


def _add_explain(explain: argparse.ArgumentParser) -> None:
    explain.add_argument("model", type=Path, help="a model file from `ilucid model train`")
    explain.add_argument("--top", type=int, default=6, help="terms to show")


def _add_evaluate(evaluate: argparse.ArgumentParser) -> None:
    evaluate.add_argument(
        "--trace",
        help="the trace to replay, a file, a name or 'synthetic' (default: philly; with no"
        " trace folder set, generated data)",
    )
    evaluate.add_argument(
        "--limit",
        type=positive_int,
        help="the first N jobs only (default: all; 5,000 for 'synthetic')",
    )
    evaluate.add_argument(
        "--estimators", default="user-median,ebm,lightgbm", help="comma-separated estimators"
    )


def _add_refit(refit: argparse.ArgumentParser) -> None:
    refit.add_argument(
        "--wait", type=float, default=300.0, help="seconds to wait for the new version"
    )
    add_service_options(refit)


def _train(args: argparse.Namespace) -> int:
    if args.kind == "packing":
        analyzer = PackingAnalyzer()
        if args.labelled is not None:
            profiles = load_labelled_profiles(args.labelled)
            analyzer.fit(profiles, str(args.labelled))
        else:
            directory = args.profiles or profile_dir()
            if directory is None:
                raise ValueError(
                    "pass --labelled (your own profiled jobs) or --profiles / ILUCID_PROFILE_DIR"
                    " (a folder with lucid/)"
                )
            profiles, _ = load_lucid_profiles(directory)
            analyzer.fit(profiles, f"{directory}/lucid/single_data.csv (non-commercial licence)")
        analyzer.save(args.out)
        print(f"trained on {len(profiles)} profiles from {analyzer.trained_on}")
        print(analyzer.rules())
        print(f"wrote {args.out}")
        return 0
    trace = trace_or_generated(args.trace, "philly", limit=args.limit)
    if args.kind == "duration":
        rows = list(walk_forward_rows(trace.jobs))
        estimator = make_duration_estimator(args.estimator)
        estimator.fit(rows, [j.duration for j in trace.jobs])
        estimator.save(args.out)
        print(f"trained {estimator.name} on {len(rows):,} jobs of {trace.name}")
    else:
        count, work = load_series(trace.jobs)
        forecaster = LoadForecaster("work")
        forecaster.fit(count, work)
        forecaster.save(args.out)
        print(f"trained the load forecaster on {len(work):,} ten-minute bins of {trace.name}")
    print(f"wrote {args.out}")
    return 0


def _explain(args: argparse.Namespace) -> int:
    model = load_estimator(args.model)
    if isinstance(model, PackingAnalyzer):
        print(f"packing analyzer trained on {model.trained_on}")
        print(model.rules())
        return 0
    if isinstance(model, LoadForecaster):
        print("load forecaster (EBM) terms:", ", ".join(model.columns))
        return 0
    print(f"{model.name} duration estimator; terms by importance (scores in log(1 + seconds)):")
    for shape in model.explain_global()[: args.top]:
        pairs = list(zip(shape.bins, shape.scores, strict=False))
        step = max(1, math.ceil(len(pairs) / 10))  # at most ~10 rows per term
        print()
        print_table(
            (shape.term, "score", "duration"),
            [(label, f"{score:+.3f}", f"x{math.exp(score):.2f}") for label, score in pairs[::step]],
            align="rrr",
            title=f"{shape.term} (importance {shape.importance:.3f})",
        )
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    trace = trace_or_generated(args.trace, "philly", limit=args.limit)
    print(f"walk-forward on {trace.name}: weekly refits, last 25% of {len(trace.jobs):,} jobs")
    kinds = [k for k in args.estimators.split(",") if k]
    rows = []
    with ProgressDisplay(kinds, what="evaluated") as progress:
        for kind in kinds:
            score, _ = walk_forward(trace.jobs, partial(make_duration_estimator, kind))
            rows.append(
                (
                    score.estimator,
                    f"{score.predicted_jobs:,}",
                    score.retrains,
                    f"{score.mae_s:,.0f}",
                    f"{score.mdape:.1%}",
                    f"{score.fit_s:.1f}",
                )
            )
            progress.update([1.0] * len(rows) + [0.0] * (len(kinds) - len(rows)))
    print_table(("estimator", "jobs", "refits", "MAE s", "MdAPE", "fit s"), rows)
    return 0


def _refit(args: argparse.Namespace) -> int:
    """Ask the service for a refit; it runs in the service's worker process, not here."""
    from ilucid.service.client import call_service

    if args.wait < 0:
        raise ValueError(f"--wait must not be negative, not {args.wait}")
    with service_client(args, timeout=args.wait + 30.0) as client:
        result = call_service(client, "POST", "/model/refit", params={"wait": args.wait})
    if result["status"] == "done":
        print(f"duration model v{result['version']} is live")
    elif result["status"] == "failed":
        raise ValueError(f"refit to v{result['version']} failed: {result.get('error', '')}")
    else:
        print(f"refit to v{result['version']} {result['status']} (see GET /model)")
    return 0


def _add_show(show: argparse.ArgumentParser) -> None:
    add_service_options(show)


def model_lines(status: dict[str, Any]) -> list[str]:
    """``GET /model`` as sentences: which version serves, what it was fitted on, and when
    the next refit comes."""
    version = status.get("version") or 0
    finished = status.get("finished_jobs") or 0
    needed = status.get("min_jobs") or 0
    if version:
        stamp = status.get("trained_at")
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) if stamp else "-"
        rows = status.get("trained_rows")
        fitted = f"fitted {when} on {rows:,} finished jobs" if rows else f"fitted {when}"
        head = f"{status.get('kind', 'duration')} model v{version}: {fitted}"
    else:
        head = (
            f"{status.get('kind', 'duration')} model: none fitted yet ({finished:,} of the"
            f" {needed:,} finished jobs the first fit needs); estimates come from each"
            " user's history until then"
        )
    every = status.get("refit_every") or 0
    interval = status.get("refit_interval_s") or 0.0
    cadence = [f"every {every:,} finished jobs"] if every else []
    if interval:
        cadence.append(f"every {interval:,.0f} s")
    lines = [head, f"finished jobs seen: {finished:,}"]
    lines.append(f"refits: {' or '.join(cadence) if cadence else 'only when asked'}")
    if status.get("refitting"):
        lines.append(f"refitting now, to v{status.get('refit_version')}")
    if status.get("last_error"):
        lines.append(f"last refit failed: {status['last_error']}")
    return lines


def _show(args: argparse.Namespace) -> int:
    """The served duration model, from ``GET /model``."""
    from ilucid.service.client import call_service

    with service_client(args) as client:
        status = call_service(client, "GET", "/model")
    for line in model_lines(status):
        print(printable(line))
    return 0


def _run(args: argparse.Namespace) -> int:
    return VERBS[args.verb].run(args)


#: ``ilucid model``'s verbs, dispatched by name
VERBS: dict[str, Command] = {
    verb.name: verb
    for verb in (
        Command("train", "fit an estimator and save it", _add_train, _train),
        Command(
            "explain", "print a saved model's shape functions or rules", _add_explain, _explain
        ),
        Command(
            "evaluate",
            "walk-forward duration error on the last 25% of a trace",
            _add_evaluate,
            _evaluate,
        ),
        Command(
            "show",
            "the running service's duration model: version, what it was fitted on, refits",
            _add_show,
            _show,
        ),
        Command(
            "refit",
            "refit a running service's duration model now (admin; see /model)",
            _add_refit,
            _refit,
        ),
    )
}

COMMANDS = (Command("model", "train, explain and evaluate the estimators", _add_arguments, _run),)

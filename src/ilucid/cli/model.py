"""``ilucid model ...``: train, explain and evaluate the estimators from the command line."""

from __future__ import annotations

import argparse
import math
import os
from functools import partial
from pathlib import Path

from ilucid.cli.common import DEFAULT_DATA, DEFAULT_URL, Command, add_commands, stored_token
from ilucid.estimators import load_estimator, make_duration_estimator, walk_forward
from ilucid.estimators.features import walk_forward_rows
from ilucid.estimators.forecast import LoadForecaster, load_series
from ilucid.estimators.packing import PackingAnalyzer
from ilucid.estimators.profiles import load_labelled_profiles, load_lucid_profiles, profile_dir
from ilucid.traces import load_trace

__all__ = ["COMMANDS"]


def _add_arguments(model: argparse.ArgumentParser) -> None:
    add_commands(model.add_subparsers(dest="verb", required=True), VERBS.values())


def _add_train(train: argparse.ArgumentParser) -> None:
    train.add_argument("kind", choices=["duration", "packing", "forecast"])
    train.add_argument("--trace", help="trace to learn from (duration, forecast)")
    train.add_argument("--estimator", default="ebm", help="ebm, user-median or lightgbm")
    train.add_argument("--profiles", type=Path, help="profile folder (default: ILUCID_PROFILE_DIR)")
    train.add_argument(
        "--labelled",
        type=Path,
        help="packing: a CSV of your own labelled profiles (see docs)",
    )
    train.add_argument("--out", type=Path, required=True, help="model file to write")


def _add_explain(explain: argparse.ArgumentParser) -> None:
    explain.add_argument("model", type=Path)
    explain.add_argument("--top", type=int, default=6, help="terms to show")


def _add_evaluate(evaluate: argparse.ArgumentParser) -> None:
    evaluate.add_argument("--trace", required=True)
    evaluate.add_argument("--estimators", default="user-median,ebm,lightgbm")


def _add_refit(refit: argparse.ArgumentParser) -> None:
    refit.add_argument("--url", default=os.environ.get("ILUCID_URL", DEFAULT_URL))
    refit.add_argument("--token", default=os.environ.get("ILUCID_TOKEN"))
    refit.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    refit.add_argument(
        "--wait", type=float, default=300.0, help="seconds to wait for the new version (300)"
    )


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
    if not args.trace:
        raise ValueError(f"model train {args.kind} needs --trace")
    trace = load_trace(args.trace)
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
        print(f"  {shape.term}  (importance {shape.importance:.3f})")
        pairs = list(zip(shape.bins, shape.scores, strict=False))
        step = max(1, math.ceil(len(pairs) / 10))  # at most ~10 rows per term
        for label, score in pairs[::step]:
            print(f"      {label:>24}  {score:+.3f}  (x{math.exp(score):.2f} duration)")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    trace = load_trace(args.trace)
    print(f"walk-forward on {trace.name}: weekly refits, last 25% of {len(trace.jobs):,} jobs")
    print(f"{'estimator':12} {'jobs':>7} {'refits':>6} {'MAE s':>10} {'MdAPE':>7} {'fit s':>7}")
    for kind in [k for k in args.estimators.split(",") if k]:
        score, _ = walk_forward(trace.jobs, partial(make_duration_estimator, kind))
        print(
            f"{score.estimator:12} {score.predicted_jobs:>7,} {score.retrains:>6}"
            f" {score.mae_s:>10,.0f} {score.mdape:>7.1%} {score.fit_s:>7.1f}",
            flush=True,
        )
    return 0


def _refit(args: argparse.Namespace) -> int:
    """Ask the service for a refit; it runs in the service's worker process, not here."""
    import httpx

    from ilucid.service.client import call_service

    token = stored_token(args)
    if args.wait < 0:
        raise ValueError(f"--wait must not be negative, not {args.wait}")
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=args.url, headers=headers, timeout=args.wait + 30.0) as client:
        result = call_service(client, "POST", "/model/refit", params={"wait": args.wait})
    if result["status"] == "done":
        print(f"duration model v{result['version']} is live")
    elif result["status"] == "failed":
        raise ValueError(f"refit to v{result['version']} failed: {result.get('error', '')}")
    else:
        print(f"refit to v{result['version']} {result['status']} (see GET /model)")
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
            "walk-forward duration error on the last 25%% of a trace",
            _add_evaluate,
            _evaluate,
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

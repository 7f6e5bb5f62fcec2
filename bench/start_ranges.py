"""Issue 37's bench: expected starts as calibrated ranges on Philly and ITP 01-05.

Run with ``make bench-start-ranges`` (needs ``ILUCID_TRACE_DIR``). Each trace is
one ``ilucid simulate`` run under the default profile, the CLI's own path, and
the figures are what it writes to summary.json: over the predictions made at
submission for jobs that did not start at once,

- ``start_interval_coverage``: the share whose 80% range held the real start
  (goal 0.75-0.85);
- ``start_error_median_norm``: the median of |start - predicted median| /
  max(real wait, 10 min) (goal <= 0.5);
- ``start_interval_width_median_s``: how wide the ranges were.

The cost is measured in the same run: full Philly with its predictions
(``--start-predictions 500``, the default) against the same replay with none
(``--start-predictions 0``), interleaved, each ``--repeat`` times, summary.json's
``wall_s`` (goal: at most 1.10x). The verdict takes each setting's fastest run:
on a shared 2-core machine the same replay took from 11.5 s to 17.3 s, so a median
of a few runs measures the neighbours as much as the predictions; the medians are
printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ilucid.cli.core_build import core_build

TRACES = ("philly", "itp-01", "itp-02", "itp-03", "itp-04", "itp-05")
COVERAGE_GOAL = (0.75, 0.85)
ERROR_GOAL = 0.5
COST_GOAL = 1.10


def _simulate(trace: str, *extra: str) -> dict[str, Any]:
    """summary.json of one ``ilucid simulate`` run of the default profile."""
    with tempfile.TemporaryDirectory(prefix="ilucid-bench-") as out:
        command = [sys.executable, "-m", "ilucid.cli", "simulate", "--trace", trace]
        command += ["--out", out, "--processes", "1", *extra]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr}")
        summary: dict[str, Any] = json.loads(
            (Path(out) / "summary.json").read_text(encoding="utf-8")
        )["ilucid"]
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=",".join(TRACES), help="comma-separated traces")
    parser.add_argument("--repeat", type=int, default=5, help="Philly timings per setting")
    args = parser.parse_args()
    if not os.environ.get("ILUCID_TRACE_DIR"):
        print("set ILUCID_TRACE_DIR to the public traces (e.g. ../shared/traces)", file=sys.stderr)
        return 2
    print(f"core: {core_build()}")
    print(
        f"{'trace':8} {'predictions':>11} {'coverage':>9} {'width s':>9}"
        f" {'error/max(wait,10min)':>22} {'verdict':>8}"
    )
    failed = 0
    for trace in [t for t in args.traces.split(",") if t]:
        s = _simulate(trace)
        coverage, error = s["start_interval_coverage"], s["start_error_median_norm"]
        ok = COVERAGE_GOAL[0] <= coverage <= COVERAGE_GOAL[1] and error <= ERROR_GOAL
        failed += not ok
        print(
            f"{trace:8} {s['start_predictions']:>11,} {coverage:>9.3f}"
            f" {s['start_interval_width_median_s']:>9,.0f} {error:>22.3f}"
            f" {'met' if ok else 'MISSED':>8}"
        )
    with_predictions, without = [], []
    for _ in range(max(1, args.repeat)):  # interleaved, so a slow spell hits both
        with_predictions.append(_simulate("philly")["wall_s"])
        without.append(_simulate("philly", "--start-predictions", "0")["wall_s"])
    ratio = min(with_predictions) / min(without)
    typical = statistics.median(with_predictions) / statistics.median(without)
    print(
        f"philly wall s over {len(without)} runs each, fastest (median): with predictions"
        f" {min(with_predictions):.2f} ({statistics.median(with_predictions):.2f}), without"
        f" {min(without):.2f} ({statistics.median(without):.2f}): {ratio:.3f}x ({typical:.3f}x)"
        f" (goal <= {COST_GOAL:.2f}x) {'met' if ratio <= COST_GOAL else 'MISSED'}"
    )
    failed += ratio > COST_GOAL
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Issue 35's figures: bursting against always-on cloud nodes, under the default profile.

Run with ``make bench-hybrid`` (needs ``ILUCID_TRACE_DIR``). For itp-04 and Philly it
runs ``ilucid study hybrid`` (the CLI's own path) with on-prem nodes sized for the
trace's load, a quarter as many cloud nodes at 2.5 per GPU-hour with a 300 s start-up,
released after 600 s idle, and values of waiting 3, 6 and 10 per GPU-hour. The study
prints each burst run's share of the always-on run's mean-JCT gain and of its cost;
this bench then checks the issue's goal (at least 70% of the gain for at most 35% of
the cost, at some value of waiting) and prints it per trace.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ilucid.cli import main
from ilucid.traces import trace_dir

TRACES = ("itp-04", "philly")
VALUES = "3,6,10"
GAIN, COST = 0.70, 0.35


def run() -> int:
    if trace_dir() is None:
        print("bench/hybrid.py needs ILUCID_TRACE_DIR (the public traces)", file=sys.stderr)
        return 2
    out = Path("out/bench-hybrid")
    verdicts = []
    for trace in TRACES:
        folder = out / trace
        argv = ["study", "hybrid", "--trace", trace, "--value-of-wait", VALUES]
        print(f"\n== ilucid {' '.join(argv)} ==", flush=True)
        if main([*argv, "--out", str(folder)]) != 0:
            return 1
        runs = json.loads((folder / "hybrid.json").read_text())
        best = None
        for label, summary in runs.items():
            gain, cost = summary.get("jct_gain_share"), summary.get("cost_share")
            if gain is None or cost is None:
                continue
            print(
                f"{trace} {label}: {gain:.0%} of the always-on JCT gain for {cost:.0%} of its cost"
            )
            if gain >= GAIN and cost <= COST and (best is None or gain > best[1]):
                best = (label, gain, cost)
        verdicts.append((trace, best))
    print()
    for trace, best in verdicts:
        if best is None:
            goal = f"{GAIN:.0%} of the gain for {COST:.0%} of the cost"
            print(f"{trace}: no value of waiting reaches {goal}")
        else:
            print(f"{trace}: goal met by '{best[0]}': {best[1]:.0%} of the gain for {best[2]:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(run())

"""Issue 33's GPU type figures: speed-ratio allocation against type-blind placement.

Run with ``make bench-hetero`` (needs ``ILUCID_TRACE_DIR``). For itp-04 and Philly it
runs ``ilucid study hetero`` (the CLI's own path: V100, P100 and K80 nodes in thirds,
Gavel's measured speeds, the default profile, nodes sized for load 0.6) with the
speed-ratio and fastest-first rules (type-blind is always run), then prints each rule's
mean JCT over type-blind's and checks the issue's goal: speed ratio at most 0.70x.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ilucid.cli import main
from ilucid.traces import trace_dir

TRACES = ("itp-04", "philly")
GOAL = 0.70
SPEED_RATIO, BLIND = "speed ratio (default)", "type-blind"


def run() -> int:
    if trace_dir() is None:
        print("bench/hetero.py needs ILUCID_TRACE_DIR (the public traces)", file=sys.stderr)
        return 2
    out = Path("out/bench-hetero")
    verdicts = []
    for trace in TRACES:
        folder = out / trace
        argv = ["study", "hetero", "--trace", trace, "--rules", "speed-ratio,fastest"]
        print(f"\n== ilucid {' '.join(argv)} ==", flush=True)
        if main([*argv, "--out", str(folder)]) != 0:
            return 1
        runs = json.loads((folder / "hetero.json").read_text())
        verdicts.append((trace, runs[SPEED_RATIO]["avg_jct"] / runs[BLIND]["avg_jct"]))
    print()
    for trace, ratio in verdicts:
        verdict = "met" if ratio <= GOAL else "NOT MET"
        print(
            f"{trace}: speed ratio {ratio:.3f}x type-blind mean JCT (goal <= {GOAL:.2f}x) {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(run())

"""Issue #5's figures: fragmentation study, hybrid cost/wait trade-off, per-type speeds.

Run with ``make bench-placement`` (needs ``ILUCID_TRACE_DIR``):

1. ``ilucid study fragmentation --variants all``: best-fit, worst-fit and fgd on every
   Alibaba v2023 pod list with the trace's 1,213 GPU nodes;
2. ``ilucid study hybrid --trace itp-04``: on-prem only vs bursting at two values of
   waiting time (1 and 10 per GPU-hour; cloud at 2.5 per GPU-hour, 300 s start-up);
3. ``ilucid study hetero --trace itp-04``: V100/P100/K80 thirds with Gavel's speeds,
   type-blind vs fastest-type-first.
"""

from __future__ import annotations

import sys

from ilucid.cli import main
from ilucid.traces import trace_dir


def run() -> int:
    if trace_dir() is None:
        print("bench/placement.py needs ILUCID_TRACE_DIR (the public traces)", file=sys.stderr)
        return 2
    failed = 0
    out = "out/bench-placement"
    for argv in (
        ["study", "fragmentation", "--variants", "all", "--out", f"{out}/fragmentation"],
        ["study", "hybrid", "--trace", "itp-04", "--out", f"{out}/hybrid"],
        ["study", "hetero", "--trace", "itp-04", "--out", f"{out}/hetero"],
    ):
        print(f"\n== ilucid {' '.join(argv[:4])} ==", flush=True)
        failed += main(argv) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run())

"""Training + real-time inference under the default profile (``--policy tiered`` for
issue #4's), static partitioning, FIFO.

Scenario (a): Philly and ITP cluster04 at their convention sizes plus Alibaba
DLRM inference services thinned to 10% of the GPUs (docs/scenarios.md).
Scenario (b): Alibaba GPU v2023 with LS pods as inference and BE pods as
training, on 8-GPU nodes sized for an offered load of 0.5 (the trace's own
1,213-node inventory is almost idle: about 0.3% load). Each run prints its table;
ratios are against the training-only replay measured in the same run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ilucid.cli.study.mixed import run_mixed_command
from ilucid.studies.mixed import DEFAULT_CHECKPOINT_S
from ilucid.traces import trace_dir

SCENARIOS = (
    ("itp-04", "alibaba-dlrm", None),
    ("philly", "alibaba-dlrm", None),
    ("alibaba", "none", 0.5),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="ilucid", choices=("ilucid", "tiered"))
    options = parser.parse_args()
    if trace_dir() is None:
        print("bench/mixed.py needs ILUCID_TRACE_DIR (the public traces)", file=sys.stderr)
        return 2
    failed = 0
    for trace, inference, load in SCENARIOS:
        print(f"\n== {trace} + {inference} ==", flush=True)
        args = argparse.Namespace(
            trace=trace,
            policy=options.policy,
            inference=inference,
            share=0.10,
            reserve=0.2,
            preemption_limit=None,
            tiers=None,
            target_p99=60.0,
            checkpoint=DEFAULT_CHECKPOINT_S,
            limit=None,
            load=load,
            out=Path("out/bench-mixed") / trace,
        )
        try:
            run_mixed_command(args)
        except ValueError as exc:
            print(f"{trace}: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

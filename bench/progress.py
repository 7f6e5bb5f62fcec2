"""Issue 33's progress figures: the default profile against oracle SRTF with jobs reporting.

Run with ``make bench-progress`` (needs ``ILUCID_TRACE_DIR``). For Philly and ITP 01-05
it runs ``ilucid simulate --no-profiles`` (the CLI's own path) twice: with
``--progress-share 0.6`` for srtf, tiresias and the default profile, and with
``--progress-share 0`` for the default alone (today's figures, which the first run must
not need). It prints the default's mean JCT over oracle SRTF's (goal <= 1.10x) and its
p99.9 queueing over Tiresias' (goal <= 2x).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ilucid.cli import main
from ilucid.traces import trace_dir

TRACES = ("philly", "itp-01", "itp-02", "itp-03", "itp-04", "itp-05")
SHARE = 0.6
JCT_GOAL, QUEUE_GOAL = 1.10, 2.0


def _simulate(trace: str, policies: str, share: float, out: Path) -> dict[str, dict[str, float]]:
    argv = ["simulate", "--trace", trace, "--policy", policies, "--no-profiles"]
    argv += ["--progress-share", str(share), "--out", str(out)]
    print(f"\n== ilucid {' '.join(argv)} ==", flush=True)
    if main(argv) != 0:
        raise SystemExit(1)
    figures: dict[str, dict[str, float]] = json.loads((out / "summary.json").read_text())
    return figures


def run() -> int:
    if trace_dir() is None:
        print("bench/progress.py needs ILUCID_TRACE_DIR (the public traces)", file=sys.stderr)
        return 2
    out = Path("out/bench-progress")
    rows = []
    for trace in TRACES:
        shared = _simulate(trace, "srtf,tiresias,ilucid", SHARE, out / trace / "share-0.6")
        alone = _simulate(trace, "ilucid", 0.0, out / trace / "share-0")
        srtf, tiresias, ilucid = shared["srtf"], shared["tiresias"], shared["ilucid"]
        rows.append(
            (
                trace,
                alone["ilucid"]["avg_jct"] / srtf["avg_jct"],
                ilucid["avg_jct"] / srtf["avg_jct"],
                ilucid["p999_queue"] / max(1.0, tiresias["p999_queue"]),
            )
        )
    print(f"\ndefault profile, --no-profiles; share {SHARE} of jobs report their progress")
    print("trace     share 0 / srtf   share 0.6 / srtf   p99.9 queue / tiresias   goals")
    for trace, before, after, queue in rows:
        met = after <= JCT_GOAL and queue <= QUEUE_GOAL
        print(
            f"{trace:8s}  {before:14.3f}x  {after:16.3f}x  {queue:22.3f}x   "
            + ("met" if met else "NOT MET")
        )
    return 0


if __name__ == "__main__":
    sys.exit(run())

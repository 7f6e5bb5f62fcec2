"""``simulate --explain`` read as a new user reads it (issue 34, first day point 8).

Reasons that differ only in their counts are one line with the counts' ranges (not
23 near-identical "N GPUs are free but on 2 nodes" lines); no sentence nests
parentheses; a job without GPUs says it is CPU-only; and an estimate made in a batch
at a refit days before the job's submission says so (its "0 of 50 finished jobs"
was the history at that refit, not at the submission).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ilucid.core import Cluster, JobSpec, make_policy
from ilucid.core.policies import DEFAULT_PROFILE
from ilucid.sim.engine import simulate
from ilucid.sim.explainer import merged_waits

NESTED = re.compile(r"\([^)]*\(")


def nested(text: str) -> bool:
    """An opening parenthesis inside another ("GPU(s)" is a plural, not one)."""
    return NESTED.search(text.replace("(s)", "")) is not None


def test_reasons_that_differ_only_in_counts_are_one_line_with_their_ranges() -> None:
    free = (
        "pending: {} GPUs are free but on 2 nodes (at most {} on one); the job needs 8 on one node"
    )
    waits = {
        free.format(9, 7): 5_411.0,
        free.format(13, 5): 549.0,
        free.format(8, 4): 1_706.0,
        "pending: all 48 GPUs are busy (48 training)": 29_248.0,
        "pending: behind syn-000215 on node0": 3.0,  # names keep their digits
        "pending: behind syn-000219 on node0": 2.0,
    }
    assert merged_waits(waits) == [
        ("pending: all 48 GPUs are busy (48 training)", 29_248.0),
        (free.format("8-13", "4-7"), 7_666.0),
        ("pending: behind syn-000215 on node0", 3.0),
        ("pending: behind syn-000219 on node0", 2.0),
    ]


def test_a_cpu_only_job_in_a_replay_says_it_uses_no_gpus() -> None:
    jobs = [JobSpec("a", 0.0, 2, 100.0), JobSpec("cpu", 10.0, 0, 50.0)]
    result = simulate(jobs, Cluster.homogeneous(1, 8), make_policy(DEFAULT_PROFILE), explain="cpu")
    said = [text for _, text in result.story]
    assert any("CPU-only" in text for text in said), said
    assert not any("GPU(s)" in text or "spans 0 nodes" in text for text in said), said


def test_simulate_explain_merges_reasons_and_says_when_its_estimate_was_made(
    tmp_path: Path,
) -> None:
    printed = subprocess.run(
        [
            *(sys.executable, "-m", "ilucid.cli", "simulate", "--trace", "synthetic"),
            *("--limit", "2000", "--out", str(tmp_path), "--explain", "syn-000260"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    lines = printed[printed.index("syn-000260 under") :].splitlines()
    assert not [line for line in lines if nested(line)], printed
    fragmented = [line for line in lines if "GPUs are free but on 2 nodes" in line]
    assert len(fragmented) == 1, fragmented  # one total, the counts as ranges
    waits = [line for line in lines if line.startswith("  waited ")]
    assert len(waits) == len({re.sub(r"[\d,-]+", "#", line[9:]) for line in waits}) >= 3
    # the job was submitted at t=262,836 and estimated in the batch of the t=0 refit
    estimate = next(line for line in lines if "finished jobs" in line)
    assert estimate.startswith(
        "  estimated at t=0, the refit before its submission at t=262,836: no estimate:"
    ), estimate

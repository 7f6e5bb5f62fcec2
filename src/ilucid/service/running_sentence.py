"""What a running job is doing, in one sentence: where, since when, and why it started.

``explain`` on a pending job answers with the core's wait sentence; on a running
one a user wants the GPUs and node it holds, since when (the service's local
time, as the CLI prints times), and the decision that started it, from the
job's stored story. A job whose user stated its run time is also told how much
that statement counted, and whether the job has overrun it
(:func:`estimate_sentence`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ilucid.core import Cluster, Placement
from ilucid.core.model import DEFAULT_ESTIMATE_S
from ilucid.service.db import JobRow
from ilucid.service.estimate_trust import why_of
from ilucid.service.job_store import RUNNING, StoryLine, spec_of
from ilucid.service.lifecycle import NO_GPUS, Stimulus

__all__ = ["clock", "describe_running", "estimate_sentence", "ran_s", "span"]


def describe_running(
    row: JobRow,
    story: Sequence[StoryLine],
    placement: Placement | None,
    cluster: Cluster,
    stopping: str | None,
    now: float,
) -> str:
    """``running on GPUs 0,1 of node-0 since 14:02:05 (3 min 20 s); started because: ...``.

    ``placement`` is the core's (which nodes); the row's GPU indices are the
    backend's (which devices), known once the job is launched.
    """
    started = next((s for s in reversed(story) if s.stimulus == Stimulus.START.value), None)
    since = started.time if started is not None else now
    where = _where(row.gpu_indices, placement, cluster)
    if not row.gpu_indices:
        text = f"starting {where}: decided at {clock(since, now)}, not launched yet"
    else:
        text = f"running {where} since {clock(since, now)} ({span(now - since)})"
    if stopping is not None:
        text = f"being stopped ({stopping}); {text}"
    if row.profile_until is not None:
        text += (
            f"; a profiling run until {clock(row.profile_until, now)}, then it waits in the"
            " queue again with what was measured"
        )
    if started is not None and started.reason:
        text += f"; started because: {started.reason}"
    said = estimate_sentence(row, ran_s(story, now))
    return f"{text}; {said}" if said else text


def ran_s(story: Sequence[StoryLine], now: float) -> float:
    """Seconds the job has run so far, summed over its runs in the story (a run lasts
    from its move to running until its next move elsewhere)."""
    ran, since = 0.0, None
    for line in story:
        if line.to_state == RUNNING:
            since = line.time if since is None else since
        elif since is not None:
            ran += max(0.0, line.time - since)
            since = None
    return ran + (max(0.0, now - since) if since is not None else 0.0)


def estimate_sentence(row: JobRow, ran: float) -> str:
    """How a stated run time counted in the estimate the job is ranked by, and whether
    the job (having run ``ran`` s) overran it; "" for a job without a statement::

        estimate 60 s: the user's 1 s counted 50% (no ended job with a stated estimate
        yet) against no model estimate (3,600 s assumed); it overran its estimate of
        1 s, which counts no more: ranked by 3,600 s since
    """
    if row.estimate_s is None:
        return ""
    spec = spec_of(row)
    stated, claim = spec.stated_estimate, spec.claim_ends()
    if stated is None or claim is None:
        return ""
    model = (
        f"the model's {spec.model_duration:,.0f} s"
        if row.model_estimate_s is not None
        else f"no model estimate ({DEFAULT_ESTIMATE_S:,.0f} s assumed)"
    )
    text = (
        f"estimate {spec.expected_duration:,.0f} s: the user's {stated:,.0f} s counted"
        f" {spec.stated_weight:.0%} ({why_of(row.estimate_note)}) against {model}"
    )
    if ran < claim:
        return text
    still = spec.standing_estimate(ran)
    ranked = (
        f"ranked by {still:,.0f} s since"
        if still is not None
        else "ranked by the run time of longer past jobs (or twice its own) since"
    )
    return f"{text}; it overran its estimate of {claim:,.0f} s, which counts no more: {ranked}"


def _where(gpu_indices: str, placement: Placement | None, cluster: Cluster) -> str:
    """``on GPUs 0,1 of node-0``, ``on 8 GPUs of a and 8 GPUs of b``, ``without GPUs``."""
    if placement is None or not placement.parts or gpu_indices == NO_GPUS:
        return "without GPUs"
    nodes = cluster.nodes
    if len(placement.parts) == 1 and gpu_indices:
        index, count = placement.parts[0]
        return f"on GPU{'' if count == 1 else 's'} {gpu_indices} of {nodes[index].name}"
    held = [
        f"{count} GPU{'' if count == 1 else 's'} of {nodes[i].name}" for i, count in placement.parts
    ]
    return "on " + (held[0] if len(held) == 1 else f"{', '.join(held[:-1])} and {held[-1]}")


def clock(moment: float, now: float) -> str:
    """``14:02:05`` today, ``2024-05-01 14:02:05`` another day (the service's local time)."""
    local = time.localtime(moment)
    same_day = local[:3] == time.localtime(now)[:3]
    return time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", local)


def span(seconds: float) -> str:
    """``45 s``, ``3 min 20 s``, ``2 h 5 min``, ``3 d 4 h``."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"

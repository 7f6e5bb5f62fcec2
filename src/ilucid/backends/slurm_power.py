"""Slurm's cloud nodes (``State=CLOUD`` under power saving) in ilucid's words: which pool a
node is in and where it stands in its power cycle, from ``sinfo --json`` (22.05).

Pure functions over what ``sinfo --json`` says of a node: its ``state_flags`` and its
``features``. Slurm 22.05 as observed on the test cluster (docs/slurm.md, "Cloud nodes"):
a powered-down cloud node is ``idle`` with flags ``CLOUD, POWERED_DOWN`` (sinfo ``idle~``);
right after ``State=POWER_UP`` it has ``POWER_UP`` too, then ``POWERING_UP`` and
``NOT_RESPONDING`` (``idle#``) until its slurmd registers; up, only ``CLOUD``; after
``State=POWER_DOWN``, ``POWER_DOWN`` (``idle!``), then ``POWERING_DOWN`` (``idle%``) for
``SuspendTimeout``, then ``POWERED_DOWN`` again.
"""

from __future__ import annotations

from collections.abc import Iterable

from ilucid.backends.base import PowerState

__all__ = ["DEFAULT_POOL", "POOL_FEATURE", "is_cloud", "pool_of", "power_state", "powering"]

#: a cloud node's pool when none of its features names one
DEFAULT_POOL = "cloud"
#: the feature that names a node's pool (``pool_<name>``: Slurm features cannot hold '=')
POOL_FEATURE = "pool_"


def _upper(flags: Iterable[str]) -> set[str]:
    return {str(flag).upper() for flag in flags}


def is_cloud(flags: Iterable[str]) -> bool:
    """Whether Slurm says the node is configured ``State=CLOUD`` (flag ``CLOUD``)."""
    return "CLOUD" in _upper(flags)


def pool_of(features: Iterable[str]) -> str:
    """The pool a cloud node is in: ``pool_gpu-a100`` -> ``gpu-a100``; the first such
    feature counts; :data:`DEFAULT_POOL` when it has none."""
    for feature in features:
        name = feature.strip()
        if name.startswith(POOL_FEATURE) and len(name) > len(POOL_FEATURE):
            return name.removeprefix(POOL_FEATURE)
    return DEFAULT_POOL


def power_state(flags: Iterable[str]) -> PowerState:
    """Where a cloud node stands, from its state flags. Going down wins (it is off before
    a later power-up can start); asked up counts as starting even while still
    ``POWERED_DOWN`` (the power-save thread has not run the ResumeProgram yet)."""
    said = _upper(flags)
    if "POWERING_DOWN" in said:
        return PowerState.STOPPING
    if "POWERING_UP" in said or "POWER_UP" in said:
        return PowerState.STARTING
    if "POWERED_DOWN" in said:
        return PowerState.OFF
    if "POWER_DOWN" in said:
        return PowerState.STOPPING
    return PowerState.ON


def powering(flags: Iterable[str]) -> bool:
    """A cloud node that is off or on its way up: Slurm flags it ``NOT_RESPONDING`` until
    its slurmd registers, which is no reason to give it no work (a job placed there waits
    for it, and placing one there powers it up)."""
    return is_cloud(flags) and power_state(flags) in (PowerState.OFF, PowerState.STARTING)

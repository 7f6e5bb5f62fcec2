"""A replay's copy of a job with its estimate keeps every other field."""

from __future__ import annotations

import dataclasses

from ilucid.core import JobClass, JobSpec
from ilucid.sim.estimates import with_estimate

#: a job whose every field differs from its default (a field added to JobSpec later
#: must be given one here, or the test below says so)
SAMPLE = JobSpec(
    "j1",
    12.5,
    1,  # a share of one GPU (gpu_milli) is one GPU
    3600.0,
    job_class=JobClass.INFERENCE,
    tenant="vision",
    user="ada",
    gpu_type="a100",
    gpu_memory_gb=40.0,
    gpu_milli=500,
    priority=3,
    shape=(1,),
    estimate=1800.0,
    checkpoint_s=600.0,
    preferred_gpu_types=("a100", "v100"),
    cpus=4.0,
    memory_gb=32.0,
    stated_estimate=900.0,
    stated_weight=0.4,
    type_speeds=(("a100", 2.0), ("v100", 1.0)),
    cloud=False,
)


def test_the_sample_sets_every_field() -> None:
    for field in dataclasses.fields(JobSpec):
        default = field.default
        if field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        assert getattr(SAMPLE, field.name) != default, f"give SAMPLE a non-default {field.name}"


def test_only_the_estimate_changes() -> None:
    copy = with_estimate(SAMPLE, 42.0)
    assert copy == dataclasses.replace(SAMPLE, estimate=42.0)
    assert copy.estimate == 42.0 and SAMPLE.estimate == 1800.0

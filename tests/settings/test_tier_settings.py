"""The tiered settings file: what it sets, and errors that name file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from ilucid.core import Cluster, JobSpec, Scheduler
from ilucid.core.policies.router import InferenceRouter
from ilucid.core.policies.tiered import TieredPlan
from ilucid.core.quota import TenantQuota
from ilucid.service.live_policies import live_policy_factory
from ilucid.settings.tier_settings import TierSettingsError, load_tier_config

GOOD = """\
# what the team leads agreed
reserve_training = 0.3
preemption_limit = 10

[tenants.vision]
guaranteed = 64
borrow_limit = 16
weight = 2

[tenants.speech]
guaranteed = 8
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tiers.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_sets_the_reserve_the_limit_and_each_tenants_quota(tmp_path: Path) -> None:
    config = load_tier_config(_write(tmp_path, GOOD))
    assert config.reserve_training == 0.3
    assert config.preemption_limit == 10
    assert config.starve_after_s == 86400.0  # not in the file: the default
    assert dict(config.quotas) == {
        "vision": TenantQuota(guaranteed=64, borrow_limit=16, weight=2.0),
        "speech": TenantQuota(guaranteed=8),
    }


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "guaranteed = 64",
            "guaranteed = -3",
            ":6: tenants.vision.guaranteed: guaranteed GPUs must be >= 0, got -3",
        ),
        ("weight = 2", 'weight = "high"', ":8: tenants.vision.weight: must be a number"),
        ("borrow_limit = 16", "borrow = 16", ":7: tenants.vision.borrow: unknown tenant setting"),
        (
            "reserve_training = 0.3",
            "reserve_training = 1.5",
            ":2: reserve_training: reserve_training must be in [0, 1), got 1.5",
        ),
        ("preemption_limit = 10", "preemption_limit = 2.5", ":3: preemption_limit: must be a"),
        ("preemption_limit = 10", "preempt_limit = 10", ":3: preempt_limit: unknown setting"),
        ("guaranteed = 8", "guaranteed = true", ":11: tenants.speech.guaranteed: must be a"),
    ],
)
def test_a_bad_value_is_refused_with_its_file_line_and_field(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    path = _write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(TierSettingsError) as caught:
        load_tier_config(path)
    assert str(caught.value).startswith(f"{path}{expected}")


def test_a_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("weight = 2", "weight = = 2"))
    with pytest.raises(TierSettingsError, match=r"tiers\.toml: .*line 8"):
        load_tier_config(path)


def test_a_missing_file_is_an_error_that_names_it(tmp_path: Path) -> None:
    with pytest.raises(TierSettingsError, match=r"nope\.toml: cannot read"):
        load_tier_config(tmp_path / "nope.toml")


def test_the_live_service_runs_tiered_with_the_files_quotas(tmp_path: Path) -> None:
    # speech may borrow 0 beyond its 2 guaranteed GPUs: its third 1-GPU job waits and
    # says so, although 2 of the 4 GPUs are idle
    path = _write(tmp_path, "[tenants.speech]\nguaranteed = 2\nborrow_limit = 0\n")
    policy = live_policy_factory(tiers=load_tier_config(path))("tiered")
    assert isinstance(policy, InferenceRouter) and isinstance(policy.training, TieredPlan)
    scheduler = Scheduler(Cluster.homogeneous(1, 4), policy)
    for k in range(3):
        scheduler.submit(JobSpec(f"s{k}", 0, 1, 100, estimate=100, tenant="speech"), 0)
    scheduler.schedule(0)
    assert [scheduler.jobs[f"s{k}"].status.value for k in range(3)] == [
        "running",
        "running",
        "pending",
    ]
    assert "tenant speech uses 2/2 guaranteed GPUs and may borrow 0 more" in (
        scheduler.why_pending("s2", 0)
    )

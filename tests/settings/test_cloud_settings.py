"""Issue 35: paid pools, the site's value of waiting and tenants' budgets in the tiers file."""

from __future__ import annotations

from pathlib import Path

import pytest

from ilucid.core import PoolSpec
from ilucid.core.cloud import CloudBudget
from ilucid.settings.cloud_settings import load_cloud_settings
from ilucid.settings.tier_settings import TierSettingsError, load_tier_config

SITE = """\
reserve_training = 0.2
value_of_wait = 10

[pools.cloud]
price_per_gpu_hour = 2.5
startup_s = 300
idle_release_s = 900
max_nodes = 16

[tenants.vision]
guaranteed = 8
budget = 5000
value_of_wait = 20

[tenants.lab]
cloud = false
"""


def test_pools_and_budgets_are_read_beside_the_quotas(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text(SITE)
    cloud = load_cloud_settings(path)
    assert cloud.pools == {
        "cloud": PoolSpec("cloud", 2.5, 300.0, idle_release_s=900.0, max_nodes=16)
    }
    assert cloud.value_of_wait == 10.0
    assert cloud.budgets == {
        "vision": CloudBudget(limit=5000.0, value_of_wait=20.0),
        "lab": CloudBudget(cloud=False),
    }
    # the quota reader takes the same file, leaving the cloud keys to this one
    tiers = load_tier_config(path)
    assert tiers.reserve_training == 0.2 and tiers.quotas["vision"].guaranteed == 8


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("idle_release_s = 900", 'idle_release_s = "soon"'),
            ":7: pools.cloud.idle_release_s: must be a number",
        ),
        (
            ("max_nodes = 16", "max_nodes = 1.5"),
            ":8: pools.cloud.max_nodes: must be a whole number",
        ),
        (
            ("budget = 5000", "budget = -1"),
            ":12: tenants.vision.budget: must be a finite number >= 0",
        ),
        (("cloud = false", "cloud = 0"), ":16: tenants.lab.cloud: must be true or false"),
        (("startup_s = 300", "start_up = 300"), ":6: pools.cloud.start_up: unknown pool setting"),
        (("price_per_gpu_hour = 2.5\n", ""), ":4: pools.cloud: needs price_per_gpu_hour"),
    ],
)
def test_a_bad_pool_or_budget_names_the_file_line_and_field(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    path = tmp_path / "site.toml"
    path.write_text(SITE.replace(*change))
    with pytest.raises(TierSettingsError) as caught:
        load_cloud_settings(path)
    assert str(caught.value).startswith(str(path)), caught.value
    assert message in str(caught.value), caught.value


def test_budgets_without_a_pool_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text("[tenants.vision]\nbudget = 10\n")
    with pytest.raises(TierSettingsError, match=r"need a \[pools.NAME\] table"):
        load_cloud_settings(path)

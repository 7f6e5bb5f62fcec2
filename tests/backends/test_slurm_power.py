"""Cloud nodes in ``sinfo --json`` (Slurm 22.05): the state flags and features below are
the ones the test cluster showed through a power cycle (docs/slurm.md, "Cloud nodes")."""

from __future__ import annotations

import pytest

from ilucid.backends.base import PowerState
from ilucid.backends.slurm_parse import logical_cluster, parse_nodes, unavailable_reason
from ilucid.backends.slurm_power import pool_of, power_state


def sinfo_node(name: str, state: str, flags: list[str], features: str = "") -> dict[str, object]:
    return {
        "name": name,
        "state": state,
        "state_flags": flags,
        "features": features,
        "gres": "gpu:a100:4(S:0),gpu:v100:4(S:0)",
        "partitions": ["gpu"],
        "reason": "",
        "cpus": 64,
        "real_memory": 16000,
    }


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["CLOUD", "POWERED_DOWN"], PowerState.OFF),  # idle~
        (["CLOUD", "POWER_UP", "POWERED_DOWN"], PowerState.STARTING),  # asked up
        (["CLOUD", "NOT_RESPONDING", "POWERING_UP"], PowerState.STARTING),  # idle#
        (["CLOUD"], PowerState.ON),
        (["CLOUD", "POWER_DOWN"], PowerState.STOPPING),  # idle!
        (["CLOUD", "POWERING_DOWN"], PowerState.STOPPING),  # idle%
    ],
)
def test_power_state_from_slurms_flags(flags: list[str], expected: PowerState) -> None:
    assert power_state(flags) is expected


def test_pool_from_a_feature_else_cloud() -> None:
    assert pool_of(["pool_cloud"]) == "cloud"
    assert pool_of(["ib", "pool_burst-a100"]) == "burst-a100"
    assert pool_of(["ib"]) == "cloud"
    assert pool_of(["pool_"]) == "cloud"


def test_a_starting_cloud_node_is_not_excluded_a_down_one_is() -> None:
    nodes = parse_nodes(
        {
            "nodes": [
                sinfo_node("cloud1", "idle", ["CLOUD", "NOT_RESPONDING", "POWERING_UP"]),
                sinfo_node("cloud2", "down", ["CLOUD", "POWERED_DOWN"], "pool_spot"),
                sinfo_node("node1", "idle", ["NOT_RESPONDING"]),
            ]
        }
    )
    starting, down, ordinary = nodes
    assert unavailable_reason(starting) is None
    assert unavailable_reason(down) == "down"
    assert unavailable_reason(ordinary) == "not responding"  # an ordinary node: as before
    cluster, _ = logical_cluster(nodes)
    pools = {node.name: node.labels.get("pool") for node in cluster.nodes}
    assert pools == {
        "cloud1/a100": "cloud",
        "cloud1/v100": "cloud",
        "cloud2/a100": "spot",
        "cloud2/v100": "spot",
        "node1/a100": None,
        "node1/v100": None,
    }

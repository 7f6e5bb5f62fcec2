"""A real Slurm 22.05 cluster from Debian's packages for the Slurm backend tests.

``slurm/start_slurm.sh`` installs slurm-wlm and munge when they are missing
(as root, through apt), starts a private munged, writes slurm.conf/gres.conf
for one node with 8 GPUs of two types (4 a100, 4 v100; device files made
with mknod because Debian's 22.05 drops file-less GPU GRES) and starts
slurmctld and slurmd. The tests skip, saying why, only where that cannot work
(not root, no apt, daemons refuse to start).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from unix_accounts import ensure_account

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm_harness import SlurmCluster, started_cluster

#: the ordinary account the Slurm tests' jobs run as (a root service submits each job as
#: its token's account): the one tests/service/test_job_privileges.py gives Alice
SLURM_ACCOUNT = "ilucid-alice"


def _cluster(nodes: int, gres: str = "mixed", cloud: int = 0) -> Iterator[SlurmCluster]:
    yield from started_cluster(nodes, gres, cloud)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """One node, 8 GPUs of two types."""
    yield from _cluster(1)


@pytest.fixture(scope="session")
def slurm_two_nodes() -> Iterator[SlurmCluster]:
    """Two slurmd daemons on this host (``slurmd -N``), each with 4 a100 + 4 v100."""
    yield from _cluster(2)


@pytest.fixture(scope="session")
def slurm_typed_nodes() -> Iterator[SlurmCluster]:
    """Two slurmd daemons, one GPU type each (issue 18's heterogeneous cluster): node1
    has 4 a100, node2 has 4 v100 (typed GRES: ``Gres=gpu:a100:4`` and ``Type=a100``)."""
    yield from _cluster(2, "split")


@pytest.fixture(scope="session")
def slurm_cloud_nodes() -> Iterator[SlurmCluster]:
    """One ordinary node (node1) and two cloud nodes (cloud1, cloud2: ``State=CLOUD
    Feature=pool_cloud``, 4 a100 + 4 v100 each) under Slurm's power saving, powered down
    at the start: ``scontrol update NodeName=cloudN State=POWER_UP`` makes Slurm's
    ResumeProgram start a slurmd for it, ``State=POWER_DOWN`` its SuspendProgram stop it
    (``SlurmCluster.power_log()`` says which ran). Slurm never powers a node down by
    itself here. Shared by the session: a test leaves the cloud nodes off."""
    yield from _cluster(1, cloud=2)


@pytest.fixture(scope="session")
def slurm_account() -> str:
    """A real, unprivileged Unix account for the jobs (created once per machine): a root
    Slurm backend runs no job without one."""
    if os.geteuid() != 0:
        pytest.skip("submitting Slurm jobs as another account needs root")
    return ensure_account(SLURM_ACCOUNT)


@pytest.fixture
def slurm_data() -> Iterator[Path]:
    """A data directory for a Slurm backend, outside pytest's private ``tmp_path``: as
    root, the jobs run as :func:`slurm_account` and write their output into its spool
    folder, which they must reach (tmp_path's parents are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="ilucid-slurm-data-"))
    folder.chmod(0o711)  # a data directory may be made inside it (test_slurm's serve)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)

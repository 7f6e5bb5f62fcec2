"""Issue 35: what the live service asks the cluster manager for a machine of two halves.

Slurm shows a machine with two GPU types as two logical nodes (``cloud1/a100``,
``cloud1/v100``) that power up and down together. The keeper asks the machine up for
its first half and down after its last; a backend's refusal keeps the node as it is and
a backend that cannot answer now is asked again next pass. The backend here records
the calls (the real ones are tested on Slurm: tests/backends/test_slurm_burst.py)."""

from __future__ import annotations

from ilucid.backends.base import BackendUnavailable, PowerState
from ilucid.core import Cluster, JobSpec, Node, PoolSpec, Scheduler, SchedulerConfig, make_policy
from ilucid.service.cloud_keeper import CloudKeeper, machine_of

NODES = (
    Node("onprem/a100", 4, "a100"),
    Node("onprem/v100", 4, "v100"),
    Node("cloud1/a100", 4, "a100", labels={"pool": "cloud"}),
    Node("cloud1/v100", 4, "v100", labels={"pool": "cloud"}),
)
CONFIG = SchedulerConfig(
    pools={"cloud": PoolSpec("cloud", 2.5, 60.0, idle_release_s=100.0)}, value_of_wait=1000.0
)


class Recorder:
    """Answers like a cluster manager that powers machines; records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.unavailable = 0  # this many calls raise BackendUnavailable first

    def power_states(self) -> dict[str, PowerState]:
        return {}

    def power_up(self, node: str) -> None:
        self._call("up", node)

    def power_down(self, node: str) -> None:
        self._call("down", node)

    def _call(self, what: str, node: str) -> None:
        if self.unavailable:
            self.unavailable -= 1
            raise BackendUnavailable("slurmctld is restarting")
        self.calls.append((what, node))


def test_a_machine_comes_up_for_its_first_half_and_goes_down_after_its_last() -> None:
    scheduler = Scheduler(Cluster(NODES), make_policy("fifo"), config=CONFIG)
    backend = Recorder()
    keeper = CloudKeeper(backend, "recorder")
    for name, kind in (("hold-a", "a100"), ("hold-v", "v100")):
        scheduler.submit(JobSpec(name, 0, 4, 10_000, gpu_type=kind, estimate=10_000), 0)
    scheduler.submit(JobSpec("a", 0, 4, 500, gpu_type="a100", estimate=500), 0)
    scheduler.schedule(0)
    keeper.carry_out(scheduler)
    assert backend.calls == [("up", "cloud1/a100")]
    # the v100 half bursts while the machine is up: nothing to ask
    scheduler.submit(JobSpec("v", 10, 4, 500, gpu_type="v100", estimate=500), 10)
    scheduler.schedule(10)
    keeper.carry_out(scheduler)
    assert backend.calls == [("up", "cloud1/a100")]
    # the a100 half idles out first: the machine stays up for its v100 half
    scheduler.finish("a", 560)
    scheduler.schedule(560)
    scheduler.schedule(660)
    keeper.carry_out(scheduler)
    assert backend.calls == [("up", "cloud1/a100")]
    # then the v100 half: the machine goes down, asked once
    scheduler.finish("v", 570)
    scheduler.schedule(570)
    scheduler.schedule(670)
    keeper.carry_out(scheduler)
    assert backend.calls == [("up", "cloud1/a100"), ("down", "cloud1/v100")]
    assert machine_of("cloud1/v100") == "cloud1"


def test_a_power_change_the_backend_cannot_take_now_is_asked_again_next_pass() -> None:
    scheduler = Scheduler(Cluster(NODES), make_policy("fifo"), config=CONFIG)
    backend = Recorder()
    backend.unavailable = 1
    keeper = CloudKeeper(backend, "recorder")
    scheduler.submit(JobSpec("hold", 0, 4, 10_000, gpu_type="a100", estimate=10_000), 0)
    scheduler.submit(JobSpec("a", 0, 4, 500, gpu_type="a100", estimate=500), 0)
    scheduler.schedule(0)
    assert keeper.carry_out(scheduler) == []
    assert backend.calls == []
    said = keeper.carry_out(scheduler)
    assert backend.calls == [("up", "cloud1/a100")]
    assert said == ["cloud1/a100 (cloud) brought up: a bursts there"]

"""The live side of paid pools: the core's power changes carried out through the cluster
manager, and the spending kept across restarts.

The core decides which on-demand node comes up for a burst and which idle one is
released (:mod:`ilucid.core.cloud`); this keeper asks the backend (Slurm's
``scontrol ... State=POWER_UP``, a Kubernetes ProvisioningRequest) and stores the
ledger in the database in the pass's own transaction, so a restart neither forgets a
month's spending nor bills a node twice. A node named ``machine/type`` is one half of
a machine with two GPU types: the machine comes up with its first half and is released
with its last.
"""

from __future__ import annotations

import logging

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from ilucid.backends.base import BackendUnavailable, PowersNodes, PowerState
from ilucid.core import Scheduler
from ilucid.core.cloud import PowerChange, TenantSpend, month_of
from ilucid.service.db import CloudLedgerRow

__all__ = ["CloudKeeper", "machine_of"]

logger = logging.getLogger(__name__)

_TENANT, _POOL, _NODE, _RUN, _TOTAL = "tenant", "pool", "node", "run", "total"
_ALL = "all"


def machine_of(node: str) -> str:
    """The machine a logical node is part of (``cloud1/a100`` -> ``cloud1``)."""
    return node.split("/", 1)[0]


class CloudKeeper:
    """Carries out power changes and keeps the ledger; callers hold the service's lock."""

    def __init__(self, powers: PowersNodes | None, backend_name: str) -> None:
        self.powers = powers
        self.backend_name = backend_name
        self._stored_version = -1
        #: changes the backend could not take yet (asked again next pass)
        self._retry: list[PowerChange] = []
        #: what was asked, for /metrics and the tenants view
        self.power_ups = 0
        self.releases = 0
        self._warned = False

    # -- restart -------------------------------------------------------------------------
    def restore(self, session: Session, scheduler: Scheduler, now: float) -> dict[str, float]:
        """Put the stored ledger into a fresh core and take up the nodes the backend says
        are up; returns each stored open run's start (job id -> since), for adoption."""
        cloud = scheduler.cloud
        if cloud is None:
            return {}
        rows = session.scalars(select(CloudLedgerRow)).all()
        month = month_of(now)
        spend = {
            r.name: TenantSpend(r.month, r.cost, r.gpu_hours)
            for r in rows
            if r.kind == _TENANT and r.month == month
        }
        pools = {r.name: (r.cost, r.gpu_hours) for r in rows if r.kind == _POOL}
        node_since = {r.name: r.since for r in rows if r.kind == _NODE and r.since is not None}
        runs = {r.name: r.since for r in rows if r.kind == _RUN and r.since is not None}
        totals = {r.name: r.cost for r in rows if r.kind == _TOTAL}
        cloud.restore(spend, pools, node_since, totals)
        states = self._states()
        index = {node.name: i for i, node in enumerate(scheduler.cluster.nodes)}
        for name, state in states.items():
            i = index.get(name)
            if i is None:
                continue
            pool = scheduler.cluster.nodes[i].labels.get("pool")
            if pool is None or pool not in cloud.pools:
                continue
            if state in (PowerState.ON, PowerState.STARTING):
                cloud.adopted(i, pool, state is PowerState.ON, now)
        # taking up what is already up asks the backend nothing (a node the ledger had up
        # and the backend has down went while the service was down: its bill closed there)
        cloud.take_changes()
        self._stored_version = -1
        return runs

    def _states(self) -> dict[str, PowerState]:
        if self.powers is None:
            return {}
        try:
            return self.powers.power_states()
        except BackendUnavailable as exc:
            logger.warning("ilucid serve: reading cloud nodes' power: %s", exc)
            return {}

    # -- every pass ----------------------------------------------------------------------
    def store(self, session: Session, scheduler: Scheduler) -> None:
        """Write the ledger when it changed (in the pass's transaction: intent first)."""
        cloud = scheduler.cloud
        if cloud is None or cloud.version == self._stored_version:
            return
        spend, pools, nodes, runs = cloud.ledger()
        session.execute(delete(CloudLedgerRow).where(CloudLedgerRow.kind.in_([_NODE, _RUN])))
        session.execute(delete(CloudLedgerRow).where(CloudLedgerRow.kind.in_([_POOL, _TOTAL])))
        for tenant, cost in cloud.tenant_cost.items():
            session.add(CloudLedgerRow(kind=_TOTAL, name=tenant, month=_ALL, cost=cost))
        for tenant, book in spend.items():
            session.merge(
                CloudLedgerRow(
                    kind=_TENANT,
                    name=tenant,
                    month=book.month,
                    cost=book.cost,
                    gpu_hours=book.gpu_hours,
                )
            )
        for pool, (cost, hours) in pools.items():
            session.add(
                CloudLedgerRow(kind=_POOL, name=pool, month=_ALL, cost=cost, gpu_hours=hours)
            )
        for node, since in nodes.items():
            session.add(CloudLedgerRow(kind=_NODE, name=node, month=_ALL, since=since))
        for job_id, since in runs.items():
            session.add(CloudLedgerRow(kind=_RUN, name=job_id, month=_ALL, since=since))
        self._stored_version = cloud.version

    def carry_out(self, scheduler: Scheduler) -> list[str]:
        """Ask the backend for the pass's power changes (after the commit); returns the
        sentences logged, for the caller's story."""
        changes = self._retry + scheduler.take_power_changes()
        self._retry = []
        if not changes:
            return []
        if self.powers is None:
            if not self._warned:
                logger.warning(
                    "ilucid serve: the %s backend cannot bring nodes up or release them;"
                    " paid pools' nodes are used as they are",
                    self.backend_name,
                )
                self._warned = True
            return []
        cloud = scheduler.cloud
        # machines up in the core, and those up before this pass's changes
        coming = {change.node for change in changes if change.up}
        up_now: set[str] = set()
        up_before: set[str] = set()
        if cloud is not None:
            nodes = scheduler.cluster.nodes
            for i in cloud.up:
                up_now.add(machine_of(nodes[i].name))
                if nodes[i].name not in coming:
                    up_before.add(machine_of(nodes[i].name))
        said: list[str] = []
        asked: set[tuple[str, bool]] = set()
        for change in changes:
            machine = machine_of(change.node)
            if (machine, change.up) in asked:
                continue
            if not change.up and machine in up_now:
                continue  # its other half still runs a job or waits out its idle time
            if change.up and machine in up_before:
                continue  # the machine is up already, for its other half
            try:
                if change.up:
                    self.powers.power_up(change.node)
                    self.power_ups += 1
                else:
                    self.powers.power_down(change.node)
                    self.releases += 1
            except BackendUnavailable as exc:
                logger.warning("ilucid serve: power change on %s for now: %s", change.node, exc)
                self._retry.append(change)
                continue
            except ValueError as exc:  # e.g. a job the cluster manager shows there
                logger.warning("ilucid serve: %s kept as it is: %s", change.node, exc)
                continue
            asked.add((machine, change.up))
            verb = "brought up" if change.up else "released"
            sentence = f"{change.node} ({change.pool}) {verb}: {change.why}"
            logger.info("ilucid serve: %s", sentence)
            said.append(sentence)
        return said

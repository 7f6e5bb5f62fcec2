"""Tenant quotas: guaranteed GPUs, a borrowing limit and a fair-share weight.

A tenant (a team, a virtual cluster) is guaranteed ``guaranteed`` GPUs for its
training and best-effort jobs: when it asks for them, jobs of tenants that
borrowed beyond their own guarantee are preempted to give them back. While
others do not need their share, a tenant may borrow up to ``borrow_limit``
GPUs beyond its guarantee. Among tenants, idle capacity goes to the one with
the lowest usage per unit of ``weight`` first (weighted fair share).
Inference is outside quotas: it is governed by the training reserve instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ilucid.core.decision import Reason
from ilucid.core.picklable import picklable
from ilucid.core.reason_codes import ReasonCode

__all__ = ["QuotaBook", "TenantQuota"]


@dataclass(frozen=True, slots=True)
class TenantQuota:
    guaranteed: int = 0
    borrow_limit: int | None = None  # None: may borrow every idle GPU
    weight: float = 1.0

    def __post_init__(self) -> None:
        if self.guaranteed < 0:
            raise ValueError(f"guaranteed GPUs must be >= 0, got {self.guaranteed}")
        if self.borrow_limit is not None and self.borrow_limit < 0:
            raise ValueError(f"borrow_limit must be >= 0, got {self.borrow_limit}")
        if self.weight <= 0:
            raise ValueError(f"weight must be > 0, got {self.weight}")

    @property
    def ceiling(self) -> float:
        if self.borrow_limit is None:
            return float("inf")
        return float(self.guaranteed + self.borrow_limit)


#: Quota of a tenant the configuration does not name: nothing guaranteed, no limit.
UNCONFIGURED = TenantQuota()


class QuotaBook:
    """GPUs each tenant's training and best-effort jobs hold, judged against quotas."""

    def __init__(self, quotas: Mapping[str, TenantQuota] | None = None) -> None:
        self.quotas: dict[str, TenantQuota] = dict(quotas or {})
        self.used: dict[str, int] = {}

    def quota(self, tenant: str) -> TenantQuota:
        return self.quotas.get(tenant, UNCONFIGURED)

    def add(self, tenant: str, gpus: int) -> None:
        self.used[tenant] = self.used.get(tenant, 0) + gpus

    def remove(self, tenant: str, gpus: int) -> None:
        left = self.used.get(tenant, 0) - gpus
        if left < 0:
            raise ValueError(f"tenant {tenant} would hold {left} GPUs")
        self.used[tenant] = left

    def share(self, tenant: str) -> float:
        """Usage per unit of weight: the fair-share key (lower goes first)."""
        return self.used.get(tenant, 0) / self.quota(tenant).weight

    def within_guarantee(self, tenant: str, gpus: int) -> bool:
        return self.used.get(tenant, 0) + gpus <= self.quota(tenant).guaranteed

    def borrowing(self, tenant: str) -> int:
        """GPUs the tenant holds beyond its guarantee (what it must give back on demand)."""
        return max(0, self.used.get(tenant, 0) - self.quota(tenant).guaranteed)

    def refuse(self, tenant: str, gpus: int) -> Reason | None:
        """Why the tenant may not take ``gpus`` more, or None when it may."""
        quota = self.quota(tenant)
        used = self.used.get(tenant, 0)
        if used + gpus <= quota.ceiling:
            return None
        may = max(0.0, quota.ceiling - used)
        return Reason(
            ReasonCode.QUOTA_EXCEEDED,
            f"over its tenant's quota: tenant {tenant} uses {used}/{quota.guaranteed}"
            f" guaranteed GPUs and may borrow {may:.0f} more (needs {gpus})",
            {"used": float(used), "guaranteed": float(quota.guaranteed), "needs": float(gpus)},
        )


picklable(TenantQuota)

"""Leader election on a coordination.k8s.io/v1 Lease, so two replicas never both admit
(moved out of ``kubernetes.py``, which re-exports it)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

from ilucid.backends.kubernetes_watch import api_error

__all__ = ["LeaseElector"]


class LeaseElector:
    """Leader election on a coordination.k8s.io/v1 Lease, so two replicas never both admit.

    The holder renews the Lease every pass; another replica takes it only once
    ``renewTime + leaseDurationSeconds`` has passed, and every write carries
    the Lease's resourceVersion, so of two replicas racing for it the API
    server lets exactly one win (the other gets 409 Conflict).
    """

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        name: str,
        identity: str,
        duration_s: float = 15.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        from kubernetes import client

        self.api: Any = client.CoordinationV1Api(api_client)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.duration_s = duration_s
        self.clock = clock
        self.leading = False

    def _stamp(self) -> str:
        moment = datetime.datetime.fromtimestamp(self.clock(), datetime.UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def _spec(self, acquired: str | None, transitions: int) -> dict[str, Any]:
        now = self._stamp()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.duration_s)),
            "acquireTime": acquired or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def try_lead(self) -> bool:
        """Acquire or renew the Lease; whether this replica leads now."""
        from kubernetes.client.exceptions import ApiException

        try:
            try:
                lease = self.api.read_namespaced_lease(self.name, self.namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                body = {
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(None, 0),
                }
                self.api.create_namespaced_lease(self.namespace, body)
                self.leading = True
                return True
            spec = lease.spec
            holder = spec.holder_identity
            renewed = spec.renew_time.timestamp() if spec.renew_time else 0.0
            duration = spec.lease_duration_seconds or self.duration_s
            if holder != self.identity and self.clock() < renewed + duration:
                self.leading = False
                return False
            mine = holder == self.identity
            acquired = (
                spec.acquire_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                if mine and spec.acquire_time
                else None
            )
            transitions = (spec.lease_transitions or 0) + (0 if mine else 1)
            body = {
                "metadata": {
                    "name": self.name,
                    "namespace": self.namespace,
                    "resourceVersion": lease.metadata.resource_version,
                },
                "spec": self._spec(acquired, transitions),
            }
            self.api.replace_namespaced_lease(self.name, self.namespace, body)
            self.leading = True
            return True
        except ApiException as exc:
            if exc.status == 409:  # another replica won the race
                self.leading = False
                return False
            raise api_error(exc) from None
        except Exception as exc:
            self.leading = False
            raise api_error(exc) from None

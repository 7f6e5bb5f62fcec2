"""Backends: the cluster managers ilucid layers on (local processes first)."""

from ilucid.backends.base import Backend, Observation, ObservedJob

__all__ = ["Backend", "Observation", "ObservedJob"]

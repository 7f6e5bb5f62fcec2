"""The pure scheduling core: data model, placement, policies, decisions with reasons."""

from ilucid.core.decision import Action, Decision, Reason, ScorePart
from ilucid.core.jobs import JobState, JobStatus, RestoreOverhead
from ilucid.core.model import (
    Cluster,
    Forecast,
    JobClass,
    JobSpec,
    Node,
    Placement,
    PoolSpec,
    ProfileReport,
)
from ilucid.core.policies import POLICIES, make_policy
from ilucid.core.reason_codes import ReasonCode
from ilucid.core.scheduler import Policy, PolicyBase, Scheduler, SchedulerConfig

__all__ = [
    "POLICIES",
    "Action",
    "Cluster",
    "Decision",
    "Forecast",
    "JobClass",
    "JobSpec",
    "JobState",
    "JobStatus",
    "Node",
    "Placement",
    "Policy",
    "PolicyBase",
    "PoolSpec",
    "ProfileReport",
    "Reason",
    "ReasonCode",
    "RestoreOverhead",
    "Scheduler",
    "SchedulerConfig",
    "ScorePart",
    "make_policy",
]

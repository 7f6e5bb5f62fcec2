"""The pure scheduling core, and the extension surface a site's plugins import.

Everything a plugin needs is exported here: the phases of a pass and their
Protocols, the pass view, the registry decorator and argument reader, reasons,
and job state. The submodules are the core's own implementation: import them
only from inside ilucid (they may change between releases).
"""

from ilucid.core.arg_reader import ArgReader, NoArgs, PluginArgError
from ilucid.core.decision import Action, Decision, Reason, ScorePart
from ilucid.core.framework import (
    PHASE_ORDER,
    AdmissionFilter,
    BuildContext,
    Needs,
    Packing,
    PassView,
    Phase,
    PluginBase,
    PluginRef,
    PluginSpec,
    Preemption,
    Profile,
    Profiling,
    QueueOrder,
    StarvationGuard,
    VictimChoice,
    plugin,
    plugin_spec,
    registered,
)
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
from ilucid.core.policies import PROFILES, make_policy
from ilucid.core.reason_codes import ReasonCode
from ilucid.core.scheduler import Policy, PolicyBase, Scheduler, SchedulerConfig

__all__ = [
    "PHASE_ORDER",
    "PROFILES",
    "Action",
    "AdmissionFilter",
    "ArgReader",
    "BuildContext",
    "Cluster",
    "Decision",
    "Forecast",
    "JobClass",
    "JobSpec",
    "JobState",
    "JobStatus",
    "Needs",
    "NoArgs",
    "Node",
    "Packing",
    "PassView",
    "Phase",
    "Placement",
    "PluginArgError",
    "PluginBase",
    "PluginRef",
    "PluginSpec",
    "Policy",
    "PolicyBase",
    "PoolSpec",
    "Preemption",
    "Profile",
    "ProfileReport",
    "Profiling",
    "QueueOrder",
    "Reason",
    "ReasonCode",
    "RestoreOverhead",
    "Scheduler",
    "SchedulerConfig",
    "ScorePart",
    "StarvationGuard",
    "VictimChoice",
    "make_policy",
    "plugin",
    "plugin_spec",
    "registered",
]

"""The service's Prometheus metrics: jobs by state, pending by class and tenant, GPUs,
preemptions, decisions by reason, and the scheduling-pass latency histograms."""

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ilucid.service.db import DecisionRow, JobRow
from ilucid.service.latency import BUCKETS as PASS_BUCKETS
from ilucid.service.scheduler_service import SchedulerService

__all__ = ["render_metrics"]


def _histogram(name: str, counts: Sequence[int], total: float, count: int) -> list[str]:
    """A histogram over ``PASS_BUCKETS`` in the exposition format (cumulative buckets)."""
    lines = [f"# TYPE {name} histogram"]
    cumulative = 0
    for bound, n in zip(PASS_BUCKETS, counts, strict=False):
        cumulative += n
        lines.append(f'{name}_bucket{{le="{bound:g}"}} {cumulative}')
    lines.append(f'{name}_bucket{{le="+Inf"}} {count}')
    return [*lines, f"{name}_sum {total:.6f}", f"{name}_count {count}"]


def _label(value: object) -> str:
    """A Prometheus label value, escaped as the exposition format requires (backslash,
    double quote, newline): a tenant name cannot end its label and add a line."""
    text = str(value)
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(service: SchedulerService) -> str:
    """The metrics in Prometheus's text exposition format."""
    with Session(service.engine) as session:
        states = session.execute(select(JobRow.state, func.count()).group_by(JobRow.state)).all()
        pending = session.execute(
            select(JobRow.job_class, JobRow.tenant, func.count())
            .where(JobRow.state == "pending")
            .group_by(JobRow.job_class, JobRow.tenant)
        ).all()
        preemptions = session.scalar(select(func.coalesce(func.sum(JobRow.preemptions), 0)))
        reasons = session.execute(
            select(DecisionRow.action, DecisionRow.code, func.count()).group_by(
                DecisionRow.action, DecisionRow.code
            )
        ).all()
    with service.lock:
        free = service.scheduler.free.free_total
        total = service.cluster.total_gpus
        passes, reconciles = service.pass_latency, service.reconcile_latency
        buckets = list(passes.histogram)
        pass_sum, pass_count = passes.seconds, passes.count
        whole = list(reconciles.histogram)
        whole_sum, whole_count = reconciles.seconds, reconciles.count
    model = service.durations.status()
    lines = ["# TYPE ilucid_jobs gauge"]
    lines += [f'ilucid_jobs{{state="{_label(s)}"}} {n}' for s, n in sorted(states)]
    lines += ["# TYPE ilucid_pending_jobs gauge"]
    lines += [
        f'ilucid_pending_jobs{{class="{_label(c)}",tenant="{_label(t)}"}} {n}'
        for c, t, n in sorted(pending)
    ]
    lines += ["# TYPE ilucid_gpus_busy gauge", f"ilucid_gpus_busy {total - free}"]
    lines += ["# TYPE ilucid_gpus_total gauge", f"ilucid_gpus_total {total}"]
    lines += [
        "# TYPE ilucid_gpu_utilisation gauge",
        f"ilucid_gpu_utilisation {(total - free) / total if total else 0:.4f}",
    ]
    lines += ["# TYPE ilucid_preemptions_total counter", f"ilucid_preemptions_total {preemptions}"]
    lines += ["# TYPE ilucid_decisions_total counter"]
    lines += [
        f'ilucid_decisions_total{{action="{_label(a)}",reason="{_label(c)}"}} {n}'
        for a, c, n in sorted(reasons)
    ]
    lines += _histogram("ilucid_pass_seconds", buckets, pass_sum, pass_count)
    lines += _histogram("ilucid_reconcile_seconds", whole, whole_sum, whole_count)
    lines += [
        "# TYPE ilucid_duration_model_version gauge",
        f"ilucid_duration_model_version {model['version']}",
        "# TYPE ilucid_duration_model_refitting gauge",
        f"ilucid_duration_model_refitting {int(model['refitting'])}",
    ]
    return "\n".join(lines) + "\n"

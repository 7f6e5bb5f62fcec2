"""Which estimators a service run decides with, stored so that every profiling
report can be traced to the model that scored it."""

from __future__ import annotations

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from ilucid.estimators.packing import PackingAnalyzer
from ilucid.service.db import EstimatorVersion, JobRow
from ilucid.service.lifecycle import Phase
from ilucid.service.live_profiler import RULE_THRESHOLDS

__all__ = ["record_estimators"]


def record_estimators(
    engine: Engine, packing: PackingAnalyzer | None, packing_source: str, now: float
) -> None:
    """Add an ``estimator_versions`` row for each estimator that changed since the last run."""
    light, medium = RULE_THRESHOLDS
    if packing is not None:
        described = (packing_source or packing.trained_on, packing.training_rows)
    else:
        described = (f"rule: gpu_util <= {light:g}% light, <= {medium:g}% medium, else heavy", 0)
    with Session(engine) as session:
        ended = session.scalars(
            select(JobRow.id).where(JobRow.state.in_([Phase.SUCCEEDED.value, Phase.FAILED.value]))
        ).all()
        wanted = {
            "packing": described,
            "duration": ("median of this service's past jobs that outlived a profile", 0),
        }
        for kind, (path, rows) in wanted.items():
            last = session.scalars(
                select(EstimatorVersion)
                .where(EstimatorVersion.kind == kind)
                .order_by(EstimatorVersion.id.desc())
                .limit(1)
            ).first()
            if last is None or last.path != path:
                count = rows if kind == "packing" else len(ended)
                session.add(EstimatorVersion(kind=kind, path=path, trained_at=now, rows=count))
        session.commit()

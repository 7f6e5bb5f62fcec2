"""A sweep's report: per profile, the mean over perturbation seeds with its 95% confidence
interval, and the ratio to a baseline profile paired seed by seed.

Pairing matters: seed s is the same perturbed trace for every profile, so the ratio
profile/baseline on seed s removes what the seed did to both, and its interval is far
narrower than the two means' intervals suggest.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ilucid.sweep.grid import Cell

__all__ = ["ALL_TRACES", "Estimate", "ReportRow", "estimate", "sweep_report", "t_quantile"]

#: the trace column of the rows that pool every trace's paired ratios
ALL_TRACES = "all"

#: Student's t, 97.5th percentile, for 1..30 degrees of freedom
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t_quantile(df: int) -> float:
    """The two-sided 95% quantile of Student's t (Cornish-Fisher past 30 degrees of
    freedom: within 0.003 of the exact value there)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df)


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean and the half-width of its 95% confidence interval (NaN from one value)."""

    mean: float
    half_width: float
    n: int


def estimate(values: Sequence[float]) -> Estimate:
    n = len(values)
    if n == 0:
        return Estimate(math.nan, math.nan, 0)
    mean = math.fsum(values) / n
    if n == 1:
        return Estimate(mean, math.nan, 1)
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return Estimate(mean, t_quantile(n - 1) * math.sqrt(variance / n), n)


@dataclass(frozen=True, slots=True)
class ReportRow:
    trace: str
    params: str
    profile: str
    metric: str
    value: Estimate  # over the seeds
    ratio: Estimate | None  # profile / baseline, seed by seed; None for the baseline itself


def _number(text: str | None) -> float | None:
    if text is None or text == "":
        return None
    value = float(text)
    return None if math.isnan(value) else value


def sweep_report(
    rows: Iterable[Mapping[str, str]],
    cells: Sequence[Cell],
    metrics: Sequence[str],
    baseline: str | None,
) -> list[ReportRow]:
    """Rows per (trace, parameter set, profile) and metric, in the grid's order, then, when
    the grid has more than one trace or parameter set, each profile's paired ratios pooled
    over all of them (trace ``all``). ``rows`` are the table's; only the grid's
    successful cells count."""
    wanted = {c.key for c in cells}
    values: dict[tuple[str, str, str, str], dict[int, float]] = defaultdict(dict)
    for row in rows:
        key = (row["trace"], row["profile"], row["params"], int(row["seed"]))
        if row["status"] != "ok" or key not in wanted:
            continue
        for metric in metrics:
            number = _number(row.get(metric))
            if number is not None:
                values[(row["trace"], row["params"], row["profile"], metric)][key[3]] = number
    groups = list(dict.fromkeys((c.trace, c.params, c.profile) for c in cells))
    report: list[ReportRow] = []
    pooled: dict[tuple[str, str], list[float]] = defaultdict(list)
    for metric in metrics:
        for trace, params, profile in groups:
            by_seed = values.get((trace, params, profile, metric), {})
            ratio = None
            if baseline is not None and profile != baseline:
                base = values.get((trace, params, baseline, metric), {})
                ratios = [by_seed[s] / base[s] for s in sorted(by_seed) if base.get(s)]
                pooled[(profile, metric)].extend(ratios)
                ratio = estimate(ratios)
            mean = estimate(list(by_seed.values()))
            report.append(ReportRow(trace, params, profile, metric, mean, ratio))
    if baseline is not None and len({(t, p) for t, p, _ in groups}) > 1:
        profiles = list(dict.fromkeys(c.profile for c in cells))
        for metric in metrics:
            for profile in profiles:
                if profile != baseline:
                    ratio = estimate(pooled[(profile, metric)])
                    report.append(
                        ReportRow(
                            ALL_TRACES, "", profile, metric, Estimate(math.nan, math.nan, 0), ratio
                        )
                    )
    return report

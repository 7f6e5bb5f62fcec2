"""Reason codes (issue 31): the enum is the source of truth; docs/reason-codes.md lists
exactly its members with the same meanings, and names the files that build each."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ilucid.core import ReasonCode
from ilucid.core.reason_codes import MEANINGS

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "reason-codes.md"
PACKAGE = ROOT / "src" / "ilucid"
HEADER = ["Code", "Meaning", "Where it comes from"]


def table_rows() -> list[tuple[int, list[str]]]:
    """The table's rows below its header, as (line number, cells)."""
    lines = TABLE.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if _cells(line) == HEADER]
    assert len(starts) == 1, f"{TABLE}: expected one table headed {HEADER}"
    rows = []
    for index in range(starts[0] + 2, len(lines)):  # past the header and its --- line
        if not lines[index].startswith("|"):
            break
        cells = _cells(lines[index])
        assert len(cells) == len(HEADER), f"{TABLE}:{index + 1}: {len(cells)} cells"
        rows.append((index + 1, cells))
    return rows


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")] if "|" in line else []


def _code(cell: str, where: str) -> str:
    match = re.fullmatch(r"`(\w+)`", cell)
    assert match, f"{where}: the code {cell!r} is not one word in backticks"
    return match.group(1)


def test_the_values_are_the_codes_stored_before_the_enum() -> None:
    # stored decisions, API output, metric labels and replays' CSVs hold these strings
    assert {c.name: c.value for c in ReasonCode} == {
        "SCHEDULED": "Scheduled",
        "PACKED": "Packed",
        "BURST": "Burst",
        "DISPLACED": "Displaced",
        "PREEMPTED": "Preempted",
        "BEHIND_IN_ORDER": "BehindInOrder",
        "INSUFFICIENT_GPUS": "InsufficientGpus",
        "FRAGMENTED": "Fragmented",
        "NO_PLACEMENT": "NoPlacement",
        "TOO_LARGE": "TooLarge",
        "UNSCHEDULABLE": "Unschedulable",
        "GPU_TYPE_MISMATCH": "GpuTypeMismatch",
        "INSUFFICIENT_GPU_MEMORY": "InsufficientGpuMemory",
        "INSUFFICIENT_HOST": "InsufficientHost",
        "QUOTA_EXCEEDED": "QuotaExceeded",
        "WAITING_FOR_PROFILER": "WaitingForProfiler",
        "STARVATION_GUARD": "StarvationGuard",
        "DRAINING_FOR_STARVING_JOB": "DrainingForStarvingJob",
        "TRAINING_RESERVE": "TrainingReserve",
        "INFERENCE_POOL_FULL": "InferencePoolFull",
        "NO_PREEMPTIBLE": "NoPreemptible",
        "WAITING_FOR_FASTER_TYPE": "WaitingForFasterType",
    }
    assert ReasonCode("Fragmented") is ReasonCode.FRAGMENTED  # a stored code parses back
    assert f"{ReasonCode.QUOTA_EXCEEDED}" == str(ReasonCode.QUOTA_EXCEEDED) == "QuotaExceeded"


def test_every_code_has_its_own_meaning() -> None:
    assert set(MEANINGS) == set(ReasonCode)
    meanings = [c.meaning for c in ReasonCode]
    assert all(m.strip() and m.endswith(".") for m in meanings)
    assert len(set(meanings)) == len(meanings), "two codes share a meaning"
    # a table cell cannot hold a bar, and markdown would swallow an <angle> word
    assert not [c for c in ReasonCode if re.search(r"[|<>`]", c.meaning)]


def test_the_table_lists_exactly_the_codes_with_their_meanings() -> None:
    documented: dict[str, str] = {}
    for line, (code_cell, meaning, _) in table_rows():
        code = _code(code_cell, f"{TABLE}:{line}")
        assert code not in documented, f"{TABLE}:{line}: {code} listed twice"
        documented[code] = meaning
    assert set(documented) == {c.value for c in ReasonCode}, (
        f"{TABLE}: missing {sorted({c.value for c in ReasonCode} - set(documented))},"
        f" unknown {sorted(set(documented) - {c.value for c in ReasonCode})}"
    )
    for code in ReasonCode:
        assert documented[code.value] == code.meaning, (
            f"{TABLE}: the meaning of {code.value} differs from ReasonCode.{code.name}'s"
            " (the enum is the source of truth: copy it)"
        )


def _builders(code: ReasonCode) -> set[str]:
    """The modules under src/ilucid that name ``code`` (its definition aside)."""
    pattern = re.compile(rf"\bReasonCode\.{code.name}\b")
    return {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "reason_codes.py" and pattern.search(path.read_text(encoding="utf-8"))
    }


@pytest.mark.parametrize("code", list(ReasonCode), ids=lambda c: c.value)
def test_each_code_is_built_exactly_where_the_table_says(code: ReasonCode) -> None:
    rows = {_code(cells[0], f"{TABLE}:{line}"): (line, cells[2]) for line, cells in table_rows()}
    line, where = rows[code.value]
    named = set(re.findall(r"`([\w/]+\.py)`", where))
    for path in named:
        assert (PACKAGE / path).is_file(), f"{TABLE}:{line}: no file src/ilucid/{path}"
    builders = _builders(code)
    assert builders, f"ReasonCode.{code.name} is built nowhere: a member per code in use only"
    assert named == builders, (
        f"{TABLE}:{line}: {code.value} comes from {sorted(builders)}, the table says"
        f" {sorted(named)}"
    )

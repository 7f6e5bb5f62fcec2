"""``ilucid study <name>`` runs the studies; their old top-level names still do for one
release, hidden from ``ilucid --help`` and saying the new name (issue 31)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ilucid.cli import main
from ilucid.cli.app import build_parser

STUDIES = ("mixed", "fragmentation", "hybrid", "hetero")


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main([*argv, "--help"])
    assert done.value.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("name", STUDIES)
def test_study_help_and_the_old_names_help_both_work(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    new = _help(["study", name], capsys)
    assert new.startswith(f"usage: ilucid study {name} ")
    old = _help([name], capsys)
    assert old.startswith(f"usage: ilucid {name} ")
    assert f"`ilucid {name}` is now `ilucid study {name}`" in old
    # the same arguments under both names
    assert (
        re.sub(r"^usage: ilucid (study )?\S+ ", "", new).split(" options: ")[1]
        == (re.sub(r"^usage: ilucid \S+ ", "", old).split(" options: ")[1])
    )


def test_ilucid_help_lists_study_and_not_the_old_names() -> None:
    text = build_parser().format_help()
    listed = re.findall(r"^    (\S+)", text, re.MULTILINE)
    assert "study" in listed and "simulate" in listed
    assert not set(STUDIES) & set(listed), listed
    usage = text.split("positional arguments:")[0]
    assert not set(STUDIES) & set(re.findall(r"[\w-]+", usage.split("{", 1)[1])), usage
    study = build_parser().parse_args(["study", "hybrid"])
    assert (study.command, study.study) == ("study", "hybrid")


def _inventory(folder: Path) -> tuple[Path, Path]:
    nodes = folder / "nodes.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        + "".join(f"n{i},32000,131072,{4 if i % 2 else 2},T4\n" for i in range(4))
    )
    pods = folder / "pods.csv"
    rows = [
        f"p{k},2000,4096,1,{250 * (1 + k % 4)},,LS,Running,{k},{k + 100},{k}" for k in range(20)
    ]
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time\n" + "\n".join(rows) + "\n"
    )
    return pods, nodes


def test_the_old_name_runs_the_same_study_and_says_the_new_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods, nodes = _inventory(tmp_path)
    tables = []
    for argv, out in ((["study", "fragmentation"], "new"), (["fragmentation"], "old")):
        inventory = ["--pods", str(pods), "--nodes", str(nodes)]
        assert main([*argv, *inventory, "--out", str(tmp_path / out)]) == 0
        tables.append(json.loads((tmp_path / out / "fragmentation.json").read_text())["pods"])
        err = capsys.readouterr().err
        said = [line for line in err.splitlines() if "is now" in line]
        if argv[0] == "study":
            assert said == []
        else:
            assert said == [
                "`ilucid fragmentation` is now `ilucid study fragmentation`;"
                " the old name goes in the next release"
            ]
    for table in tables:
        for row in table.values():
            row.pop("wall_s", None)
    assert tables[0] == tables[1] and set(tables[0]) == {"best-fit", "worst-fit", "fgd"}

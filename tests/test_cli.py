"""The ``ilucid`` command as a user runs it: outputs, errors, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ilucid.cli import main

REQUIRED_SUMMARY_KEYS = {
    "jobs",
    "avg_jct",
    "p50_jct",
    "p99_jct",
    "avg_queue",
    "p99_queue",
    "p999_queue",
    "makespan",
    "gpu_util",
    "wall_s",
}


def write_trace(path: Path, rows: list[str]) -> Path:
    path.write_text("id,submit_time,num_gpus,duration\n" + "\n".join(rows) + "\n")
    return path


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ilucid.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
        check=False,
    )


def test_simulate_writes_summary_jobs_and_report(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.csv", ["a,0,4,100", "b,10,4,50", "c,20,2,30", "d,25,8,10"])
    out = tmp_path / "out"
    code = main(
        [
            "simulate",
            "--trace",
            str(trace),
            "--policy",
            "fifo,sjf,srtf,tiresias",
            "--nodes",
            "1",
            "--out",
            str(out),
            "--processes",
            "1",
        ]
    )
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"fifo", "sjf", "srtf", "tiresias"}
    for values in summary.values():
        assert set(values) >= REQUIRED_SUMMARY_KEYS
        assert values["jobs"] == 4
    # FIFO on one 8-GPU node: a runs 0-100 and b 10-60 side by side; c (2 GPUs)
    # waits for b and runs 60-90; d (8 GPUs) waits for a and runs 100-110.
    fifo = summary["fifo"]
    assert fifo["makespan"] == 110.0
    assert fifo["avg_jct"] == (100 + 50 + 70 + 85) / 4
    lines = (out / "jobs-fifo.csv").read_text().splitlines()
    assert lines[0].startswith("job_id,submit,num_gpus,duration")
    assert len(lines) == 5
    report = (out / "report.html").read_text()
    data = report.split('<script type="application/json" id="report-data">')[1]
    charts = json.loads(data.split("</script>")[0])
    assert len(charts["charts"]) == 6 and set(charts["policies"]) == set(summary)
    # the last plots expected starts against actual ones: a CDF of their ratio
    starts = charts["charts"][-1]
    assert starts["kind"] == "cdf" and starts["x_unit"] == "ratio"
    assert starts["title"].startswith("Expected start against actual start")


def test_parallel_processes_give_the_same_results(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path / "t.csv", [f"j{i},{i * 7},{1 + i % 4},{50 + 13 * i}" for i in range(40)]
    )
    outputs = []
    for processes in ("1", "2"):
        out = tmp_path / f"out{processes}"
        assert (
            main(
                [
                    "simulate",
                    "--trace",
                    str(trace),
                    "--policy",
                    "fifo,srtf",
                    "--nodes",
                    "1",
                    "--out",
                    str(out),
                    "--processes",
                    processes,
                ]
            )
            == 0
        )
        outputs.append((out / "jobs-srtf.csv").read_text())
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize(
    ("rows", "header", "where"),
    [
        (["a,0,1,ten"], None, ":2: field 'duration':"),
        (["a,0,-1,10"], None, ":2: field 'num_gpus':"),
        (["a,5,1,10", "b,4,1,10"], None, ":3: field 'submit_time':"),
        (["a,0,1"], "id,submit_time,num_gpus", ":1: field 'duration':"),
    ],
    ids=["non-numeric-duration", "negative-gpus", "unsorted-times", "missing-column"],
)
def test_malformed_trace_fails_with_one_line(
    tmp_path: Path, rows: list[str], header: str | None, where: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text((header or "id,submit_time,num_gpus,duration") + "\n" + "\n".join(rows) + "\n")
    result = run_cli("simulate", "--trace", str(path), "--out", str(tmp_path / "o"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"ilucid: error: {path}{where}")


def test_unknown_policy_is_refused(tmp_path: Path) -> None:
    result = run_cli(
        "simulate", "--trace", "synthetic", "--policy", "fifo,lottery", "--out", str(tmp_path)
    )
    assert result.returncode == 2
    assert "unknown policy 'lottery'" in result.stderr
    assert "Traceback" not in result.stderr


def test_trace_name_without_trace_dir_explains(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ILUCID_TRACE_DIR"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ilucid.cli",
            "simulate",
            "--trace",
            "philly",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "set ILUCID_TRACE_DIR" in result.stderr


def test_demo_without_traces_runs_a_labelled_synthetic_trace(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ILUCID_TRACE_DIR"}
    result = subprocess.run(
        [sys.executable, "-m", "ilucid.cli", "demo", "--limit", "400", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "SYNTHETIC" in result.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary) == {"fifo", "sjf", "tiresias", "srtf", "qssf", "lucid", "ilucid"}
    assert all(v["jobs"] == 400 for v in summary.values())


def users_trace(path: Path, count: int = 300) -> Path:
    rows = []
    for i in range(count):
        user = f"u{i % 3}"
        duration = 600 * (1 + i % 3) ** 2 + (i * 37) % 300
        rows.append(f"j{i},{i * 400},{1 + (i % 2)},{duration},training,t,{user}")
    path.write_text("id,submit_time,num_gpus,duration,job_class,tenant,user\n" + "\n".join(rows))
    return path


def test_model_train_explain_and_evaluate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = users_trace(tmp_path / "u.csv")
    model = tmp_path / "duration.pkl"
    assert main(["model", "train", "duration", "--trace", str(trace), "--out", str(model)]) == 0
    assert model.exists()
    assert main(["model", "explain", str(model), "--top", "2"]) == 0
    shown = capsys.readouterr().out
    assert "ebm duration estimator" in shown and "importance" in shown
    assert (
        main(["model", "evaluate", "--trace", str(trace), "--estimators", "user-median,ebm"]) == 0
    )
    table = capsys.readouterr().out
    assert "user-median" in table and "ebm" in table and "MdAPE" in table


def test_simulate_explain_prints_the_jobs_story(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = users_trace(tmp_path / "u.csv", 120)
    code = main(
        [
            "simulate",
            "--trace",
            str(trace),
            "--policy",
            "qssf,fifo",
            "--nodes",
            "1",
            "--gpus-per-node",
            "2",
            "--out",
            str(tmp_path / "o"),
            "--processes",
            "1",
            "--explain",
            "j60",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "j60 under qssf" in out and "j60 under fifo" in out
    assert "start j60" in out
    assert "estimate" in out  # qssf explains its estimate; fifo has none
    assert "queued at position" in out and "expected to start at t=" in out
    assert "why these nodes: consolidation" in out  # the placement's score, term by term
    jobs = (tmp_path / "o" / "jobs-fifo.csv").read_text().splitlines()
    assert jobs[0].endswith(
        "wait_reason,profiled_s,packed,lost_work_s,predicted_start,"
        "predicted_low,predicted_high,projected_start"
    )
    predicted = [line.split(",")[-4:] for line in jobs[1:]]
    assert any(p[0] for p in predicted), "a sample of waiting jobs carries its expected start"
    ranged = [[float(v) for v in p] for p in predicted if p[0]]
    assert all(low <= mid <= high for mid, low, high, _ in ranged), "a range holds its median"


def test_explain_unknown_job_is_an_error(tmp_path: Path) -> None:
    trace = users_trace(tmp_path / "u.csv", 10)
    result = run_cli(
        "simulate", "--trace", str(trace), "--out", str(tmp_path / "o"), "--explain", "nope"
    )
    assert result.returncode == 2 and "no job 'nope'" in result.stderr


def test_packing_analyzer_trains_on_a_sites_own_profiles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = ["model,gpu_util,gmem_util,gmem,amp,batchsize,label"]
    for i in range(30):
        heavy = i % 3  # utilisation and memory traffic grow with the label
        rows.append(
            f"m{i},{20 + 35 * heavy},{10 + 25 * heavy},{2000 + 3000 * heavy},{i % 2},"
            f"{32 * (1 + i % 3)},{heavy}"
        )
    labelled = tmp_path / "mine.csv"
    labelled.write_text("\n".join(rows) + "\n")
    model = tmp_path / "pack.pkl"
    assert (
        main(["model", "train", "packing", "--labelled", str(labelled), "--out", str(model)]) == 0
    )
    out = capsys.readouterr().out
    assert f"from {labelled}" in out and "class: 2" in out
    assert main(["model", "explain", str(model)]) == 0
    assert f"trained on {labelled}" in capsys.readouterr().out


def test_bad_labelled_profiles_name_the_field(tmp_path: Path) -> None:
    labelled = tmp_path / "bad.csv"
    labelled.write_text("gpu_util,gmem_util,gmem,amp,batchsize,label\n50,20,3000,0,32,7\n")
    result = run_cli(
        "model", "train", "packing", "--labelled", str(labelled), "--out", str(tmp_path / "p.pkl")
    )
    assert result.returncode == 2
    assert f"{labelled}:2: field 'label': must be 0, 1 or 2" in result.stderr


@pytest.mark.parametrize("policy", ["ilucid", "tiered"])
def test_mixed_compares_the_profile_static_and_fifo(tmp_path: Path, policy: str) -> None:
    training = write_trace(
        tmp_path / "train.csv",
        [f"t{k},{20 * k},{1 + k % 4},{300 + 37 * k}" for k in range(40)],
    )
    header = (
        "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,"
        "rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,"
        "creation_time,scheduled_time,deletion_time"
    )
    rows = [f"s{k},HN,app,1,1,1,1,1,1,1,1,1,1,8,{100 * k},,{100 * k + 400}" for k in range(8)]
    (tmp_path / "dlrm.csv").write_text("\n".join([header, *rows]) + "\n")
    out = tmp_path / "mixed"
    result = run_cli(
        "study",
        "mixed",
        "--trace",
        str(training),
        "--inference",
        str(tmp_path / "dlrm.csv"),
        "--share",
        "0.1",
        "--load",
        "0.5",
        "--policy",
        policy,
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    assert "static partition" in result.stdout and "strict fifo" in result.stdout
    summary = json.loads((out / "mixed.json").read_text())
    tiered, fifo = summary[policy], summary["strict fifo"]
    assert tiered["inference_jobs"] == fifo["inference_jobs"] > 0
    assert tiered["p99_tts"] <= fifo["p99_tts"]
    static = next(v for k, v in summary.items() if k.startswith("static partition"))
    assert static["p99_tts"] <= max(tiered["p99_tts"], 0.0) or static["p99_tts"] <= 60
    assert summary[f"training only ({policy})"]["inference_jobs"] == 0


def test_mixed_rejects_a_bad_share(tmp_path: Path) -> None:
    training = write_trace(tmp_path / "train.csv", ["a,0,1,10"])
    result = run_cli("study", "mixed", "--trace", str(training), "--share", "1.5")
    assert result.returncode == 2
    assert "--share must be in (0, 1)" in result.stderr


def test_mixed_passes_the_preemption_limit_to_tiered(tmp_path: Path) -> None:
    training = write_trace(tmp_path / "train.csv", ["a,0,1,10"])
    result = run_cli(
        "study",
        "mixed",
        "--trace",
        str(training),
        "--inference",
        "none",
        "--preemption-limit",
        "-1",
    )
    assert result.returncode == 2
    assert "preemption_limit must be >= 0, got -1" in result.stderr


def test_mixed_and_serve_refuse_a_bad_tiers_file_before_running(tmp_path: Path) -> None:
    training = write_trace(tmp_path / "train.csv", ["a,0,1,10"])
    tiers = tmp_path / "tiers.toml"
    tiers.write_text("[tenants.vision]\nguaranteed = 4\nweight = 0\n", encoding="utf-8")
    result = run_cli(
        "study", "mixed", "--trace", str(training), "--inference", "none", "--tiers", str(tiers)
    )
    assert result.returncode == 2
    assert f"{tiers}:3: tenants.vision.weight: weight must be > 0, got 0.0" in result.stderr
    served = run_cli("serve", "--data-dir", str(tmp_path / "state"), "--tiers", str(tiers))
    assert served.returncode == 2 and f"{tiers}:3: tenants.vision.weight" in served.stderr
    tiers.write_text("reserve_training = 0.5\n", encoding="utf-8")
    other = run_cli("serve", "--policy", "fifo", "--tiers", str(tiers))
    assert other.returncode == 2
    assert "--tiers configures the ilucid and tiered profiles, not 'fifo'" in other.stderr
    assert not (tmp_path / "state").exists()  # refused before anything was created


def _hybrid(tmp_path: Path, *extra: str) -> dict[str, dict[str, object]]:
    tmp_path.mkdir(exist_ok=True)
    trace = tmp_path / "t.csv"
    rows = [f"j{k},{30 * k},{1 + k % 8},{3000 + 200 * (k % 7)},t{k % 2}" for k in range(80)]
    trace.write_text("id,submit_time,num_gpus,duration,tenant\n" + "\n".join(rows) + "\n")
    out = tmp_path / "hyb"
    result = run_cli(
        "study",
        "hybrid",
        "--trace",
        str(trace),
        "--onprem-load",
        "20",  # a short arrival span: 3 on-prem nodes for long jobs
        "--cloud-nodes",
        "2",
        "--policy",
        "fifo",
        "--out",
        str(out),
        *extra,
    )
    assert result.returncode == 0, result.stderr
    assert "always-on cloud" in result.stdout and "of always-on cost" in result.stdout
    return json.loads((out / "hybrid.json").read_text())


def test_hybrid_bursts_more_when_waiting_is_worth_more(tmp_path: Path) -> None:
    runs = _hybrid(tmp_path, "--value-of-wait", "0.01,1000")
    never, always, cheap, dear = (runs[k] for k in runs)
    assert never["cloud_cost"] == 0 and never["power_ups"] == 0
    # always-on nodes are billed for the whole replay, used or not
    assert always["cloud_node_gpu_hours"] > 0 and always["avg_jct"] < never["avg_jct"]
    assert dear["power_ups"] > 0 and dear["cloud_cost"] > 0
    assert cheap["cloud_gpu_hours"] <= dear["cloud_gpu_hours"]
    assert dear["avg_jct"] < never["avg_jct"]
    # a burst node is billed at least for the job time spent on it
    assert dear["cloud_node_gpu_hours"] >= dear["cloud_gpu_hours"]


def test_hybrid_never_spends_past_a_tenants_budget(tmp_path: Path) -> None:
    # the trace spans 40 minutes: one month, one budget each for t0 and t1
    runs = _hybrid(tmp_path, "--value-of-wait", "1000", "--budget", "20")
    free = _hybrid(tmp_path / "free", "--value-of-wait", "1000")
    (burst,) = (run for label, run in runs.items() if label.startswith("burst"))
    (unbounded,) = (run for label, run in free.items() if label.startswith("burst"))
    spent = burst["tenant_cloud_cost"]
    assert isinstance(spent, dict) and spent
    assert all(0 < cost <= 20 + 1e-6 for cost in spent.values()), spent
    # without the budget the same replay spends more: the budget stopped bursts
    assert sum(unbounded["tenant_cloud_cost"].values()) > 40, unbounded["tenant_cloud_cost"]


def test_fragmentation_study_on_a_small_inventory(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        + "".join(
            f"n{i},32000,131072,{4 if i % 2 else 2},{'T4' if i % 3 else 'V100'}\n" for i in range(6)
        )
    )
    pods = tmp_path / "pods.csv"
    rows = [
        f"p{k},{2000 + 1000 * (k % 3)},4096,{1 if k % 5 else 2},"
        f"{(250, 500, 1000, 300, 1000)[k % 5] if k % 5 else 1000},"
        f"{'V100' if k % 7 == 0 else ''},LS,Running,{k},{k + 100},{k}"
        for k in range(40)
    ]
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time\n" + "\n".join(rows) + "\n"
    )
    out = tmp_path / "frag"
    result = run_cli(
        "study", "fragmentation", "--pods", str(pods), "--nodes", str(nodes), "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    table = json.loads((out / "fragmentation.json").read_text())["pods"]
    assert set(table) == {"best-fit", "worst-fit", "fgd"}
    for row in table.values():
        assert 0 < row["allocated_share"] <= 1
        assert row["allocated_gpus"] <= row["capacity_gpus"] == 18
    assert "unallocated GPUs than best-fit at the first failure" in result.stdout


def test_explain_groups_the_story_by_stimulus() -> None:
    from ilucid.cli.client import _by_stimulus

    story = [
        {"stimulus_id": "submit-1", "text": "new -> pending"},
        {"stimulus_id": "pass-2", "text": "pending -> decided"},
        {"stimulus_id": "pass-2", "text": "decided -> running"},
        {"stimulus_id": "", "stimulus": "observed: exit", "text": "running -> succeeded"},
    ]
    groups = _by_stimulus(story)
    assert [(cause, len(lines)) for cause, lines in groups] == [
        ("submit-1", 1),
        ("pass-2", 2),
        ("observed: exit", 1),
    ]

"""Reading Slurm 22.05's JSON and refusing unsafe job fields (no Slurm needed)."""

from __future__ import annotations

import pytest

from ilucid.backends.slurm_parse import (
    check_command,
    check_name,
    foreign_job,
    gpu_indices,
    host_resources,
    logical_cluster,
    parse_gres,
    parse_jobs,
    parse_nodes,
    released_run,
    tres_gpus,
    unavailable_reason,
    wait_status,
    with_run,
)

NODES = {
    "nodes": [
        {
            "name": "node2",
            "state": "idle",
            "state_flags": ["DRAIN"],
            "gres": "gpu:v100:8(S:0-1)",
            "partitions": ["gpu"],
            "reason": "maintenance",
        },
        {
            "name": "node1",
            "state": "mixed",
            "state_flags": [],
            "gres": "gpu:a100:4(S:0),gpu:v100:4(S:0)",
            "gres_used": "gpu:a100:2(IDX:0-1),gpu:v100:0(IDX:N/A)",
            "partitions": ["gpu", "debug"],
        },
        {"name": "cpu1", "state": "idle", "gres": "", "partitions": ["cpu"]},
    ]
}


def test_gres_strings_with_and_without_types_sockets_and_indices() -> None:
    items = parse_gres("gpu:a100:4(S:0),gpu:v100:2(IDX:4,6-7),mps:100")
    assert [(i.gpu_type, i.count, i.indices) for i in items] == [
        ("a100", 4, ()),
        ("v100", 2, (4, 6, 7)),
    ]
    # right after a controller restart the decorations are missing
    assert [(i.gpu_type, i.count) for i in parse_gres("gpu:a100:4,gpu:2")] == [
        ("a100", 4),
        (None, 2),
    ]
    assert gpu_indices(["gpu:a100:2(IDX:0-1)", "gpu:a100:1(IDX:3)"]) == (
        ("a100", (0, 1)),
        ("a100", (3,)),
    )


def test_a_node_with_two_gpu_types_is_two_logical_nodes() -> None:
    nodes = parse_nodes(NODES)
    cluster, where = logical_cluster(nodes, "gpu")
    assert [(n.name, n.num_gpus, n.gpu_type) for n in cluster.nodes] == [
        ("node1/a100", 4, "a100"),
        ("node1/v100", 4, "v100"),
        ("node2", 8, "v100"),
    ]
    assert where["node1/v100"] == ("node1", "v100")
    usable = {n.name: n.usable for n in nodes}
    assert usable == {"node2": False, "node1": True, "cpu1": True}


@pytest.mark.parametrize(
    ("state", "flags", "reason", "said"),
    [
        ("idle", ["DRAIN"], "disk swap", "drained: disk swap"),
        ("mixed", ["DRAIN"], "disk swap", "draining: disk swap"),  # its jobs run on
        ("allocated", ["DRAIN"], "", "draining"),
        ("down", [], "Not responding", "down: Not responding"),
        ("down", ["DRAIN"], "psu", "down: psu"),
        ("idle", ["NOT_RESPONDING"], "", "not responding"),
        ("idle", ["MAINTENANCE", "RESERVED"], "", "in maintenance"),
        ("idle", ["RESERVED"], "", None),  # a reservation: not ilucid's business
        ("future", [], "", "not in service yet"),
        ("idle", ["REBOOT_REQUESTED"], "kernel", "rebooting: kernel"),
        ("idle", [], "", None),
        ("mixed", ["COMPLETING"], "", None),
    ],
)
def test_why_a_node_takes_no_work_is_said_in_slurms_words(
    state: str, flags: list[str], reason: str, said: str | None
) -> None:
    raw = {"name": "n", "state": state, "state_flags": flags, "gres": "gpu:4", "reason": reason}
    [node] = parse_nodes({"nodes": [raw]})
    assert unavailable_reason(node) == said
    assert node.usable is (said is None)


def test_gpu_requests_and_the_release_marker() -> None:
    assert tres_gpus("gres:gpu:a100:2") == ("a100", 2)
    assert tres_gpus("gres/gpu:4") == (None, 4)
    assert tres_gpus("gres:gpu") == (None, 1)
    assert tres_gpus("cpu=2") == (None, 0)
    comment = "ilucid:j000001:gpus=2:class=training:run=0"
    assert released_run(comment) == 0
    assert released_run(with_run(comment, 3)) == 3
    assert with_run(comment, 3) == "ilucid:j000001:gpus=2:class=training:run=3"
    assert released_run("ilucid:inference") is None  # not a job ilucid released


def test_jobs_and_wait_statuses() -> None:
    [job] = parse_jobs(
        {
            "jobs": [
                {
                    "job_id": 7,
                    "name": "ilucid-abc123-j000001",
                    "job_state": "FAILED",
                    "state_reason": "NonZeroExitCode",
                    "gres_detail": ["gpu:v100:2(IDX:4-5)"],
                    "exit_code": 256,
                    "restart_cnt": 1,
                }
            ]
        }
    )
    assert job.gres == (("v100", (4, 5)),) and job.restarts == 1
    assert wait_status(job.exit_code) == 1
    assert wait_status(15) == -15 and wait_status(0) == 0


@pytest.mark.parametrize("bad", ["gpu;rm", "a b", "-p", "x\ny", "", "a,b", "$(id)"])
def test_names_that_could_carry_syntax_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="partition"):
        check_name(bad, "partition")


def test_commands_that_could_be_read_as_options_or_break_the_script_are_refused() -> None:
    check_command(["python", "-c", "print(1); print(2)"], "/tmp")  # ';' inside an argument is data
    with pytest.raises(ValueError, match="starts with '-'"):
        check_command(["--wrap=id"], None)
    with pytest.raises(ValueError, match="shell syntax"):
        check_command(["true;scancel -u root"], None)
    with pytest.raises(ValueError, match=r"command\[2\]: newlines"):
        check_command(["sh", "-c", "true\n#SBATCH --uid=0"], None)
    with pytest.raises(ValueError, match="cwd"):
        check_command(["true"], "relative/dir")
    with pytest.raises(ValueError, match="cwd"):
        check_command(["true"], "/tmp/%j")


def test_a_nodes_cpus_and_memory_are_offered_by_each_of_its_logical_nodes() -> None:
    """sinfo --json (22.05): ``cpus`` and ``real_memory`` (MiB); a node with two GPU types
    books both halves against the whole node; a node that does not say has no limit."""
    document = {
        "nodes": [
            {"name": "node1", "gres": "gpu:a100:4(S:0),gpu:v100:4(S:0)", "cpus": 64,
             "real_memory": 16000, "partitions": ["gpu"], "state": "idle"},
            {"name": "node2", "gres": "gpu:a100:4", "partitions": ["gpu"], "state": "idle"},
        ]
    }  # fmt: skip
    cluster, _ = logical_cluster(parse_nodes(document))
    assert [(n.name, n.cpus, n.memory_gb) for n in cluster.nodes] == [
        ("node1/a100", 64.0, 16000 / 1024),
        ("node1/v100", 64.0, 16000 / 1024),
        ("node2", 0.0, 0.0),
    ]
    with pytest.raises(ValueError, match=r"node node3: real_memory '16G' is not a whole number"):
        parse_nodes({"nodes": [{"name": "node3", "real_memory": "16G"}]})


def test_cpus_and_memory_become_sbatch_options_rounded_up_to_what_slurm_allocates() -> None:
    assert host_resources(1.5, 3.0) == ["--cpus-per-task=2", "--mem=3072M"]
    assert host_resources(8, None) == ["--cpus-per-task=8"]
    assert host_resources(None, 0.001) == ["--mem=2M"]
    assert host_resources(None, None) == []


def test_a_foreign_job_brings_the_cpus_and_memory_it_asked_slurm_for() -> None:
    """squeue --json (22.05): ``--mem`` is memory_per_node, ``--mem-per-cpu`` memory_per_cpu
    (per CPU of ``minimum_cpus_per_node``); one CPU a node is Slurm's default, not a need."""
    base = {"name": "mine", "job_state": "PENDING", "comment": "ilucid", "node_count": 1}
    jobs = parse_jobs(
        {
            "jobs": [
                {**base, "job_id": 1, "memory_per_node": 3072, "minimum_cpus_per_node": 6},
                {**base, "job_id": 2, "memory_per_cpu": 500, "minimum_cpus_per_node": 2},
                {**base, "job_id": 3, "memory_per_node": None, "minimum_cpus_per_node": 1},
            ]
        }
    )
    asked = [(f.cpus, f.memory_gb) for f in map(foreign_job, jobs)]
    assert asked == [(6.0, 3.0), (2.0, 1000 / 1024), (None, None)]

"""A site's own profile file: the order its rule gives, its settings, and its errors."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import fields
from importlib import metadata
from pathlib import Path

import httpx
import pytest
from pure_python import pure_env

from ilucid.core import Cluster, JobSpec, Scheduler
from ilucid.core.framework import Needs, Phase, PluginRef
from ilucid.core.policies import PROFILES, build_profile, make_policy
from ilucid.core.policies.default import DefaultConfig, DefaultPlan
from ilucid.core.policies.in_order import InOrderPlan
from ilucid.core.policies.router import InferenceRouter
from ilucid.core.policies.rule import FunctionOrder, RuleOrder
from ilucid.core.quota import TenantQuota
from ilucid.settings.profile_file import (
    ENTRY_POINT_GROUP,
    ProfileFileError,
    load_profile,
    resolve_policies,
)
from ilucid.sim.engine import simulate

RULE = "estimate * gpus / (1 + waited / 3600)"

RULE_FILE = f"""\
# our site: short and small first, but waiting counts
[profile]
name = "my-site"
base = "rule"
summary = "GPU-seconds, discounted by hours waited"

[queue_order]
rule = "{RULE}"
reserve_training = 0.25
"""

SETTINGS_FILE = """\
[profile]
name = "long-jobs"

[settings]
starve_after_s = 43200
levels = [3600, 36000]
preemption_limit = 3
replan_interval_s = 0

[settings.quotas.vision]
guaranteed = 8
weight = 2
"""

#: DefaultConfig's fields: a [settings] table may set each (the list grows with it)
DEFAULT_FIELDS = [f.name for f in fields(DefaultConfig)]

#: (id, submit, gpus, duration, estimate) on 1 node x 1 GPU
JOBS = [
    JobSpec("a", 0, 1, 3600, estimate=3600),
    JobSpec("b", 100, 1, 1000, estimate=7200),
    JobSpec("c", 3000, 1, 1000, estimate=3600),
    JobSpec("d", 3500, 1, 500, estimate=5000),
]


@pytest.fixture(autouse=True)
def _registry() -> Iterator[None]:
    """Profiles a test registers leave with it."""
    profiles = dict(PROFILES)
    yield
    PROFILES.clear()
    PROFILES.update(profiles)


def _write(tmp_path: Path, text: str, name: str = "site.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_settings_schema_names_every_config_field_with_its_type() -> None:
    """[settings] is written out, not read off annotations (a compiled core has none):
    every DefaultConfig field is settable, in field order, with the TOML type its
    annotation says, and exactly the ``X | None`` fields may be ``false``."""
    from ilucid.settings.profile_file import _NUMBERS, _OPTIONAL, _SETTINGS

    assert list(_SETTINGS) == DEFAULT_FIELDS
    kinds = {"float": float, "int": int, "tuple[float, ...]": _NUMBERS}
    kinds["Mapping[str, TenantQuota]"] = dict
    annotations = {f.name: f.type for f in fields(DefaultConfig)}
    if not all(isinstance(text, str) for text in annotations.values()):
        # a compiled core keeps no annotation text: read it off the Python source
        code = (
            "import json, dataclasses; from ilucid.core.policies.default import DefaultConfig"
            " as C; print(json.dumps({f.name: f.type for f in dataclasses.fields(C)}))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=pure_env(),
            capture_output=True,
            text=True,
            check=True,
        )
        annotations = json.loads(done.stdout)
    for name, text in annotations.items():
        assert _SETTINGS[name] == kinds[text.removesuffix(" | None")], name
        assert (name in _OPTIONAL) == text.endswith(" | None"), name


# -- a rule profile: the order it gives, by hand ----------------------------------------
def test_a_rule_file_orders_training_by_its_rule(tmp_path: Path) -> None:
    """a runs 0-3600. At 3600: b = 7200/(1+3500/3600) = 3,650.70, c = 3600/(1+600/3600)
    = 3,085.71, d = 5000/(1+100/3600) = 4,864.86: c runs 3600-4600. At 4600:
    b = 7200/(1+4500/3600) = 3,200, d = 5000/(1+1100/3600) = 3,829.79: b runs
    4600-5600, d 5600-6100 (FIFO would run b, c, d; SJF by estimate c, d, b)."""
    entry = load_profile(_write(tmp_path, RULE_FILE))
    result = simulate(JOBS, Cluster.homogeneous(1, 1), build_profile(entry))
    assert result.policy == "my-site"
    by_id = {r.id: r for r in result.records}
    assert {j: (r.first_start, r.jct) for j, r in by_id.items()} == {
        "a": (0.0, 3600.0),
        "b": (4600.0, 5500.0),
        "c": (3600.0, 1600.0),
        "d": (5600.0, 2600.0),
    }


def test_a_rule_profiles_reasons_give_the_rule_its_value_and_inputs(tmp_path: Path) -> None:
    entry = load_profile(_write(tmp_path, RULE_FILE))
    scheduler = Scheduler(Cluster.homogeneous(1, 1), build_profile(entry))
    for job in JOBS:
        scheduler.submit(job, job.submit_time)
        scheduler.schedule(job.submit_time)
    scheduler.finish("a", 3600)
    [c] = scheduler.schedule(3600)
    assert c.explain() == (
        f"start c: my-site: priority 3,085.71 by rule `{RULE}`"
        " (estimate=3,600, gpus=1, waited=600); lowest first"
    )
    scheduler.finish("c", 4600)
    [b] = scheduler.schedule(4600)
    assert b.explain() == (
        f"start b: my-site: priority 3,200 by rule `{RULE}`"
        " (estimate=7,200, gpus=1, waited=4,500); lowest first"
    )
    assert scheduler.why_pending("d", 4600) == (
        f"pending (position 1 in my-site order): priority 3,829.79 by rule `{RULE}`"
        " (estimate=5,000, gpus=1, waited=1,100); lowest first"
    )


def test_a_rule_profile_lists_its_plugins_and_needs_estimates(tmp_path: Path) -> None:
    entry = load_profile(_write(tmp_path, RULE_FILE))
    profile = entry
    assert (profile.name, profile.summary) == ("my-site", "GPU-seconds, discounted by hours waited")
    assert profile.needs == Needs(estimates=True)
    assert profile.plugin(Phase.QUEUE_ORDER) == PluginRef(Phase.QUEUE_ORDER, "rule", {"rule": RULE})
    assert profile.plugin(Phase.INFERENCE) == PluginRef(
        Phase.INFERENCE, "inference-first", {"reserve": 0.25}
    )
    assert profile.plugin(Phase.PLAN) == PluginRef(Phase.PLAN, "in-order")
    policy = build_profile(entry)
    assert isinstance(policy, InferenceRouter) and isinstance(policy.training, InOrderPlan)
    assert isinstance(policy.training.order, RuleOrder)
    assert policy.inference.reserve_training == 0.25


# -- a settings profile on the default ----------------------------------------------------
def test_a_settings_file_builds_the_default_profile_with_its_settings(tmp_path: Path) -> None:
    entry = load_profile(_write(tmp_path, SETTINGS_FILE))
    policy = build_profile(entry)
    assert isinstance(policy, InferenceRouter) and isinstance(policy.training, DefaultPlan)
    assert policy.name == "long-jobs"
    config = policy.training.config
    assert config.levels == (3600.0, 36000.0)
    assert config.starve_after_s == 43200.0
    assert config.preemption_limit == 3
    assert config.replan_interval_s == 0.0
    assert dict(config.quotas) == {"vision": TenantQuota(guaranteed=8, weight=2.0)}
    assert config.reserve_training == 0.2  # not in the file: the default's
    profile = entry
    assert profile.summary == (
        "the default profile with starve_after_s=43200, levels=[3600,36000],"
        " preemption_limit=3, replan_interval_s=0, quotas for vision"
    )
    # profiling stays on, as in the default: the driver must supply a profiler
    assert profile.needs == Needs(estimates=True, profiler=True)
    assert [(p.point.value, p.name) for p in profile.plugins] == [
        ("starvation_guard", "wait-bound"),
        ("inference", "inference-first"),
        ("admission", "tenant-quota"),
        ("queue_order", "leveled-estimate"),
        ("profiling", "first-run"),
        ("packing", "indolent"),
        ("plan", "replan"),
    ]
    order = profile.plugin(Phase.QUEUE_ORDER)
    assert order is not None and order.args["levels"] == "3600,36000"
    guard = profile.plugin(Phase.STARVATION_GUARD)
    assert guard is not None and guard.args["after_s"] == 43200.0
    inference = profile.plugins[1]
    assert inference.args == {"reserve": 0.2, "preemption_limit": 3}


def test_false_turns_an_optional_setting_off(tmp_path: Path) -> None:
    text = '[profile]\nname = "no-profiling"\n[settings]\nprofile_limit_s = false\n'
    entry = load_profile(_write(tmp_path, text))
    policy = build_profile(entry)
    assert isinstance(policy, InferenceRouter) and isinstance(policy.training, DefaultPlan)
    assert policy.training.config.profile_limit_s is None
    assert entry.needs == Needs(estimates=True)  # no profiler, nothing packed
    assert entry.plugin(Phase.PROFILING) is None
    assert entry.plugin(Phase.PACKING) is None
    assert entry.summary == "the default profile with profile_limit_s=off"
    with pytest.raises(ProfileFileError, match=r":4: settings\.levels: must be an array"):
        load_profile(_write(tmp_path, text.replace("profile_limit_s", "levels")))


def test_a_registered_file_is_built_by_name_and_read_once(tmp_path: Path) -> None:
    path = str(_write(tmp_path, SETTINGS_FILE))
    assert resolve_policies(["fifo", path, path]) == ["fifo", "long-jobs", "long-jobs"]
    policy = make_policy("long-jobs")
    assert isinstance(policy, InferenceRouter) and isinstance(policy.training, DefaultPlan)
    assert "long-jobs" in PROFILES
    with pytest.raises(ProfileFileError, match=r":2: profile\.name: 'long-jobs' is already"):
        load_profile(path)  # now registered: a second file may not take the name


# -- an entry point --------------------------------------------------------------------
def test_an_entry_point_orders_by_the_installed_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fewest_gpus_then_oldest(fields: Mapping[str, float]) -> float:
        return fields["gpus"] * 1e6 - fields["age"]

    points = metadata.EntryPoints(
        [metadata.EntryPoint("small-first", "site_rules:small_first", ENTRY_POINT_GROUP)]
    )
    monkeypatch.setattr(metadata.EntryPoint, "load", lambda self: fewest_gpus_then_oldest)
    monkeypatch.setattr(
        metadata,
        "entry_points",
        lambda group: points if group == ENTRY_POINT_GROUP else metadata.EntryPoints([]),
    )
    text = (
        '[profile]\nname = "small-first"\nbase = "rule"\n'
        '[queue_order]\nentry_point = "small-first"\n'
    )
    entry = load_profile(_write(tmp_path, text))
    policy = build_profile(entry)
    assert isinstance(policy, InferenceRouter) and isinstance(policy.training, InOrderPlan)
    assert isinstance(policy.training.order, FunctionOrder)
    assert entry.plugin(Phase.QUEUE_ORDER) == PluginRef(
        Phase.QUEUE_ORDER, f"{ENTRY_POINT_GROUP}:small-first"
    )
    # 2 nodes x 2 GPUs, all busy with x until 100; queued: y (2 GPUs, oldest), z and w
    # (1 GPU each; z older). Keys at 100: z = 1e6 - 90, w = 1e6 - 80, y = 2e6 - 95.
    jobs = [
        JobSpec("x", 0, 4, 100, estimate=100),
        JobSpec("y", 5, 2, 100, estimate=100),
        JobSpec("z", 10, 1, 100, estimate=100),
        JobSpec("w", 20, 1, 100, estimate=100),
    ]
    scheduler = Scheduler(Cluster.homogeneous(2, 2), policy)
    for job in jobs:
        scheduler.submit(job, job.submit_time)
        scheduler.schedule(job.submit_time)
    assert [j.spec.id for j in policy.pending_order()] == ["z", "w", "y"]
    scheduler.finish("x", 100)
    started = scheduler.schedule(100)
    assert [d.job_id for d in started] == ["z", "w", "y"]  # all fit: 1 + 1 + 2 GPUs
    assert started[0].explain() == (
        "start z: small-first: priority 999,910 by entry point `small-first`; lowest first"
    )


# -- errors: one line, FILE:LINE: FIELD: message -------------------------------------------
@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            'summary = "GPU-seconds, discounted by hours waited"',
            'sumary = "x"',
            ":5: profile.sumary: unknown key; known: name, base, summary",
        ),
        (
            "reserve_training = 0.25",
            "reserve_training = 0.25\n[scoring]\nweight = 1",
            ":10: scoring: unknown section; known: profile, settings, queue_order, plugin",
        ),
        (
            "reserve_training = 0.25",
            "reserve_training = true",
            ":9: queue_order.reserve_training: must be a number, got True",
        ),
        (
            "reserve_training = 0.25",
            'reserve_training = "20%"',
            ":9: queue_order.reserve_training: must be a number, got '20%'",
        ),
        (
            f'rule = "{RULE}"',
            'rule = "estimate * gpu"',
            ":8: queue_order.rule: column 12: unknown field 'gpu'; fields: estimate, gpus,"
            " waited, age, attained, ran, remaining, priority, preemptions, inference,"
            " best_effort, now",
        ),
        (
            f'rule = "{RULE}"',
            'rule = "estimate * (gpus"',
            ":8: queue_order.rule: column 12: not an expression: '(' was never closed",
        ),
        (
            f'rule = "{RULE}"',
            'rule = "__import__(1)"',
            ":8: queue_order.rule: column 1: only these functions may be called:"
            " min, max, abs, log, log1p, sqrt, exp",
        ),
        (
            f'rule = "{RULE}"',
            'entry_point = "no-such-rule"',
            ":8: queue_order.entry_point: no entry point 'no-such-rule' in the group"
            " ilucid.priority_rules; installed: none",
        ),
        (
            f'rule = "{RULE}"',
            f'rule = "{RULE}"\nentry_point = "x"',
            ':9: queue_order.entry_point: give exactly one of rule = "..." and entry_point = "..."',
        ),
        (
            'name = "my-site"\n',
            "",
            ':2: profile.name: missing; name = "..." is what outputs show',
        ),
        (
            'name = "my-site"',
            'name = "fifo"',
            ":3: profile.name: 'fifo' is already a registered profile;"
            " give this profile a new name",
        ),
        (
            'name = "my-site"',
            'name = "a,b"',
            ":3: profile.name: 'a,b' is not a profile name: letters, digits, '.', '_' and"
            " '-', not ending in .toml",
        ),
        (
            'base = "rule"',
            'base = "lucid"',
            ":4: profile.base: must be one of ilucid, rule, got 'lucid'",
        ),
    ],
)
def test_a_rule_file_error_names_file_line_and_field(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    assert old in RULE_FILE
    path = _write(tmp_path, RULE_FILE.replace(old, new))
    with pytest.raises(ProfileFileError) as caught:
        load_profile(path)
    assert str(caught.value) == f"{path}{expected}"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "preemption_limit = 3",
            "preemption_limit = 2.5",
            ":7: settings.preemption_limit: must be a whole number or false (off), got 2.5",
        ),
        (
            "preemption_limit = 3",
            "preemption_limit = true",
            ":7: settings.preemption_limit: must be a whole number or false (off), got True",
        ),
        (
            "starve_after_s = 43200",
            'starve_after_s = "12h"',
            ":5: settings.starve_after_s: must be a number, got '12h'",
        ),
        (
            "levels = [3600, 36000]",
            'levels = [3600, "10h"]',
            ":6: settings.levels: must be an array of numbers, got [3600, '10h']",
        ),
        (
            "levels = [3600, 36000]",
            "levels = 3600",
            ":6: settings.levels: must be an array of numbers, got 3600",
        ),
        (
            "levels = [3600, 36000]",
            "levels = [36000, 3600]",
            ":6: settings.levels: levels must increase, got (36000.0, 3600.0)",
        ),
        (
            "replan_interval_s = 0",
            "replan_every = 60",
            ":8: settings.replan_every: unknown key; known: levels, starve_after_s,"
            " rewait_after_s, guard_slice_s, reserve_training, quotas, preemption_limit,"
            " lead_per_error, error_window, replan_interval_s"
            + "".join(f", {name}" for name in DEFAULT_FIELDS[10:]),
        ),
        (
            "weight = 2",
            "weight = 0",
            ":12: settings.quotas.vision.weight: weight must be > 0, got 0.0",
        ),
        (
            "guaranteed = 8",
            "guarantee = 8",
            ":11: settings.quotas.vision.guarantee: unknown key; known: guaranteed,"
            " borrow_limit, weight",
        ),
        (
            "[settings]",
            '[queue_order]\nrule = "gpus"\n[settings]',
            ':4: queue_order: only a profile with base = "rule" has a queue order;'
            ' base "ilucid" is tuned in [settings]',
        ),
    ],
)
def test_a_settings_file_error_names_file_line_and_field(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    assert old in SETTINGS_FILE
    path = _write(tmp_path, SETTINGS_FILE.replace(old, new))
    with pytest.raises(ProfileFileError) as caught:
        load_profile(path)
    assert str(caught.value) == f"{path}{expected}"


def test_a_file_without_a_profile_table_or_unreadable_says_so(tmp_path: Path) -> None:
    path = _write(tmp_path, "[settings]\nlevels = [1]\n")
    with pytest.raises(ProfileFileError, match=r":1: profile: missing the \[profile\] table"):
        load_profile(path)
    with pytest.raises(ProfileFileError, match="cannot read"):
        load_profile(tmp_path / "absent.toml")
    bad = _write(tmp_path, "[profile\nname = 1\n", "bad.toml")
    with pytest.raises(ProfileFileError, match=r"bad\.toml: .*line 1"):
        load_profile(bad)


# -- the command line ----------------------------------------------------------------------
def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ilucid.cli", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
        check=False,
    )


def test_simulate_runs_a_profile_file_next_to_a_registered_profile(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    rows = [f"j{i},{i * 50},{1 + i % 2},{300 + 70 * (i % 5)}" for i in range(30)]
    trace.write_text("id,submit_time,num_gpus,duration\n" + "\n".join(rows) + "\n")
    site = _write(tmp_path, RULE_FILE, "my_site.toml")
    out = tmp_path / "out"
    result = _run_cli(
        "simulate",
        "--trace",
        str(trace),
        "--policy",
        f"fifo,{site}",
        "--nodes",
        "1",
        "--gpus-per-node",
        "4",
        "--processes",
        "2",  # forked workers build the profile the parent registered
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"fifo", "my-site"}
    assert summary["my-site"]["jobs"] == 30
    assert (out / "jobs-my-site.csv").exists()


def test_simulate_with_a_bad_profile_file_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = _write(tmp_path, RULE_FILE.replace(RULE, "estimate * gpu"), "bad.toml")
    result = _run_cli(
        "simulate", "--trace", "synthetic", "--policy", f"fifo,{bad}", "--out", str(tmp_path)
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"ilucid: error: {bad}:8: queue_order.rule: column 12: unknown field 'gpu'; fields:"
        " estimate, gpus, waited, age, attained, ran, remaining, priority, preemptions,"
        " inference, best_effort, now"
    ]


def test_serve_runs_a_profile_file_under_its_name(tmp_path: Path) -> None:
    """``ilucid serve --policy FILE.toml`` builds the site's profile and reports its name."""
    site = _write(tmp_path, RULE_FILE, "my_site.toml")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    log = tmp_path / "serve.log"
    command = [
        *(sys.executable, "-m", "ilucid.cli", "serve", "--policy", str(site)),
        *("--data-dir", str(tmp_path / "data"), "--gpus", "2", "--port", str(port)),
    ]
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        health = None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json()
                break
            except httpx.HTTPError:
                time.sleep(0.3)
        assert health is not None, log.read_text()
        assert health["policy"] == "my-site"
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert "policy my-site" in log.read_text()


def test_serve_with_a_bad_profile_file_exits_2_before_starting(tmp_path: Path) -> None:
    bad = _write(tmp_path, RULE_FILE.replace('name = "my-site"', 'name = "fifo"'), "bad.toml")
    result = _run_cli("serve", "--policy", str(bad), "--data-dir", str(tmp_path / "data"))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"ilucid: error: {bad}:3: profile.name: 'fifo' is already a registered profile;"
        " give this profile a new name"
    ]
    assert not (tmp_path / "data").exists()

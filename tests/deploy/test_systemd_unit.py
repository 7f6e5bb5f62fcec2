"""deploy/systemd/ilucid.service: a unit systemd accepts, whose command line ilucid's own
parser takes, running as root with only what starting jobs as their users needs, and
with every option it sets (and every usual one it leaves out) explained in
docs/deploy.md.

``systemd-analyze verify`` checks the unit where systemd is installed (its ExecStart
pointed at this environment's ``ilucid``, as /opt/ilucid is not here); the other tests
read the unit as systemd does: sections, ``Key=value`` lines, ``${VAR}`` and ``$VAR``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "deploy" / "systemd" / "ilucid.service"
ENV_EXAMPLE = REPO / "deploy" / "systemd" / "ilucid.env.example"
DEPLOY_DOC = REPO / "docs" / "deploy.md"
EXEC = "/opt/ilucid/bin/ilucid"

#: what the local backend needs as root (docs/deploy.md says which step needs which)
CAPABILITIES = {
    "CAP_SETUID",
    "CAP_SETGID",
    "CAP_KILL",
    "CAP_CHOWN",
    "CAP_FOWNER",
    "CAP_DAC_OVERRIDE",
    "CAP_SYS_ADMIN",
    "CAP_SYS_PTRACE",
}
#: options that would break jobs (each inherits the service's sandbox): never set
BREAKS_JOBS = {
    "User",
    "DynamicUser",
    "NoNewPrivileges",
    "PrivateTmp",
    "ProtectHome",
    "ProtectControlGroups",
    "PrivateDevices",
    "DevicePolicy",
    "DeviceAllow",
    "ProtectClock",
    "MemoryDenyWriteExecute",
    "RestrictNamespaces",
    "SystemCallFilter",
    "RestrictSUIDSGID",
    "PrivateUsers",
    "ProtectProc",
}


def parse_unit(text: str, name: str = "unit") -> dict[str, list[tuple[str, str]]]:
    """Section -> its (key, value) lines in order (a key may repeat, as in systemd)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        key, equals, value = line.partition("=")
        assert equals and current is not None, f"{name}:{number}: not Key=value in a section"
        assert not line.endswith("\\"), f"{name}:{number}: continued lines are not expected"
        current.append((key.strip(), value.strip()))
    return sections


def _unit() -> dict[str, list[tuple[str, str]]]:
    return parse_unit(UNIT.read_text("utf-8"), str(UNIT))


def _service() -> dict[str, str]:
    """[Service]'s settings, the last assignment of each key winning."""
    return dict(_unit()["Service"])


def _assignments(value: str) -> dict[str, str]:
    """``Environment=A=1 B=2`` -> {A: 1, B: 2} (no quoting in this unit)."""
    return dict(item.split("=", 1) for item in value.split())


def environment(env_file: str) -> dict[str, str]:
    """The service's environment: the unit's Environment= lines, then the file's."""
    env: dict[str, str] = {}
    for key, value in _unit()["Service"]:
        if key == "Environment":
            env.update(_assignments(value))
    for number, raw in enumerate(env_file.splitlines(), 1):
        line = raw.strip()
        if line and not line.startswith("#"):
            name, equals, value = line.partition("=")
            assert equals and re.fullmatch(r"[A-Z_][A-Z0-9_]*", name), f"env file:{number}"
            env[name] = value
    return env


def expand(command: str, env: dict[str, str]) -> list[str]:
    """systemd's ExecStart expansion: ``${VAR}`` is one word, ``$VAR`` alone is its value
    split at whitespace (none when empty)."""
    words: list[str] = []
    for word in command.split():
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole:
            words += env.get(whole[1], "").split()
            continue
        words.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env.get(m[1], ""), word))
    return words


def _serve_parser() -> argparse.ArgumentParser:
    from ilucid.cli.serve import add_service_commands

    parser = argparse.ArgumentParser(prog="ilucid")
    add_service_commands(parser.add_subparsers(dest="command"))
    return parser


# ---------------------------------------------------------------- systemd's own check


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    ilucid = Path(sys.executable).parent / "ilucid"
    if not ilucid.is_file():
        pytest.skip(f"no ilucid console script beside {sys.executable} to stand for {EXEC}")
    text = UNIT.read_text("utf-8")
    assert text.count(f"ExecStart={EXEC} ") == 1
    copy = tmp_path / "ilucid.service"
    copy.write_text(text.replace(f"ExecStart={EXEC} ", f"ExecStart={ilucid} "), "utf-8")
    done = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=120
    )
    # verify exits 0 on an unknown key or a bad value and only says so: nothing may be said
    said = [line for line in (done.stdout + done.stderr).splitlines() if str(copy) in line]
    assert done.returncode == 0 and not said, done.stdout + done.stderr


# ---------------------------------------------------------------- the command line


def test_exec_start_parses_with_ilucids_cli() -> None:
    service = _service()
    command = service["ExecStart"]
    assert command.startswith(f"{EXEC} serve ")
    env = environment(ENV_EXAMPLE.read_text("utf-8"))
    words = expand(command, env)
    args = _serve_parser().parse_args(words[1:])
    assert args.command == "serve"
    assert str(args.data_dir) == "/var/lib/" + service["StateDirectory"]
    assert (args.host, args.port, args.backend) == ("127.0.0.1", 8787, "local")
    # with no env file at all, the unit's own defaults give the same command line
    assert expand(command, environment("")) == words


def test_every_example_setting_in_the_env_file_parses() -> None:
    """The commented examples (``#   ILUCID_SERVE_ARGS=...``) are command lines too."""
    text = ENV_EXAMPLE.read_text("utf-8")
    examples = re.findall(r"^#\s+(ILUCID_[A-Z_]+=.*)$", text, re.M)
    assert len(examples) >= 3
    parser = _serve_parser()
    for example in examples:
        name, _, value = example.partition("=")
        env = environment(text) | {name: value}
        args = parser.parse_args(expand(_service()["ExecStart"], env)[1:])
        assert args.command == "serve", example
    slurm = environment(text) | {"ILUCID_BACKEND": "slurm", "ILUCID_DATA_DIR": "/shared/ilucid"}
    args = parser.parse_args(expand(_service()["ExecStart"], slurm)[1:])
    assert (args.backend, str(args.data_dir)) == ("slurm", "/shared/ilucid")


# ---------------------------------------------------------------- privileges


def test_runs_as_root_with_only_the_capabilities_jobs_need() -> None:
    service = _service()
    assert not BREAKS_JOBS & service.keys(), BREAKS_JOBS & service.keys()
    assert set(service["CapabilityBoundingSet"].split()) == CAPABILITIES
    assert "AmbientCapabilities" not in service
    # jobs outlive a restart; the per-job cgroups are the service's; an OOM kill of a
    # job's process does not stop the scheduler; the data directory is private
    assert service["KillMode"] == "process"
    assert service["Delegate"] == "yes"
    assert service["OOMPolicy"] == "continue"
    assert service["TasksMax"] == "infinity"
    assert (service["StateDirectory"], service["StateDirectoryMode"]) == ("ilucid", "0700")
    assert service["EnvironmentFile"] == "-/etc/ilucid/ilucid.env"
    assert service["ProtectSystem"] == "full"


def test_the_hardening_set_is_what_docs_deploy_md_explains() -> None:
    doc = DEPLOY_DOC.read_text("utf-8")
    table = re.findall(r"^\| `([A-Za-z]+)=([^`]*)` \|", doc, re.M)
    documented = dict(table)
    service = _service()
    skip = {"Type", "Environment", "ExecStart", "Restart", "RestartSec"}
    for key, value in service.items():
        if key in skip:
            continue
        assert key in documented, f"docs/deploy.md: no row for {key}= ({UNIT.name})"
        if key != "CapabilityBoundingSet":
            assert documented[key] == value, f"docs/deploy.md says {key}={documented[key]}"
    # each option left out is named in the table (its own row, or a row it shares)
    rows = "\n".join(line for line in doc.splitlines() if line.startswith("| `"))
    for key in BREAKS_JOBS - {"User", "DynamicUser"}:
        assert f"`{key}=" in rows, f"docs/deploy.md: nothing says why {key}= is left out"
        assert documented.get(key, "") == "", f"docs/deploy.md: {key}= is not set"
    caps = set(re.findall(r"^\| `(CAP_[A-Z_]+)` \|", doc, re.M))
    assert caps == CAPABILITIES

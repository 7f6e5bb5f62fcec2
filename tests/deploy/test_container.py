"""deploy/container/: the image builds and runs ilucid as its fixed uid; where no image can
be built here, the runtime stage's install steps run outside one.

Building needs buildah or podman and the base image from a registry. Where either is
missing (this project's machines reach PyPI, Debian and npm, no image registry), the
image test skips and says why; the install-steps test runs everywhere: it builds the
wheel with ``python -m build --wheel`` from the same files the image's build context
holds (the repository minus .dockerignore), and runs deploy/container/install-runtime.sh
into a fresh virtual environment (no system or test site-packages), from the package
indexes pip is configured with. Only if those cannot be reached (offline) does it
install into a virtual environment that sees the test environment's site-packages, and
it says so.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tomllib
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILE = REPO / "deploy" / "container" / "Containerfile"
INSTALL_SCRIPT = REPO / "deploy" / "container" / "install-runtime.sh"
IGNORE_FILE = REPO / ".dockerignore"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]["version"]
IMAGE = f"localhost/ilucid:{VERSION}"
UID = 10001
#: pip's words for "the index could not be reached / has no such release"
OFFLINE = re.compile(
    r"No matching distribution|Could not find a version|Failed to establish a new connection"
    r"|Temporary failure in name resolution|Network is unreachable|Max retries exceeded"
)


# ---------------------------------------------------------------- the build context


def ignore_patterns(text: str) -> list[list[str]]:
    """.dockerignore's patterns, each split into path parts (``**`` spans any depth)."""
    patterns = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        assert not line.startswith("!"), f".dockerignore:{number}: exceptions are not supported"
        patterns.append(line.strip("/").split("/"))
    return patterns


def _matches(pattern: list[str], parts: list[str]) -> bool:
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_matches(pattern[1:], parts[skip:]) for skip in range(len(parts) + 1))
    return (
        bool(parts)
        and fnmatch.fnmatchcase(parts[0], pattern[0])
        and (_matches(pattern[1:], parts[1:]))
    )


def ignored(relative: str, patterns: list[list[str]]) -> bool:
    """Whether the build context leaves ``relative`` out (a left-out folder's files too)."""
    parts = relative.split("/")
    return any(_matches(p, parts[:n]) for p in patterns for n in range(1, len(parts) + 1))


def copy_context(target: Path) -> Path:
    """The repository as the image's build context holds it, copied to ``target``."""
    patterns = ignore_patterns(IGNORE_FILE.read_text("utf-8"))
    for folder, dirs, files in os.walk(REPO):
        here = Path(folder).relative_to(REPO)
        dirs[:] = [d for d in dirs if not ignored((here / d).as_posix(), patterns)]
        for name in files:
            relative = here / name
            if not ignored(relative.as_posix(), patterns):
                (target / here).mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / relative, target / relative)
    return target


def test_context_leaves_out_local_state_and_keeps_the_sources() -> None:
    patterns = ignore_patterns(IGNORE_FILE.read_text("utf-8"))
    for left_out in (
        ".venv/bin/python",
        "build/lib/ilucid/__init__.py",
        "dist/ilucid-0.1.0-py3-none-any.whl",
        ".ilucid/ilucid.db",
        "out/demo/report.html",
        "src/ilucid/core/__pycache__/jobs.cpython-311.pyc",
        "src/ilucid/core/jobs.cpython-311-x86_64-linux-gnu.so",
        ".git/HEAD",
    ):
        assert ignored(left_out, patterns), left_out
    for kept in (
        "pyproject.toml",
        "README.md",
        "src/ilucid/__init__.py",
        "src/ilucid/service/migrations/env.py",
        "deploy/container/install-runtime.sh",
    ):
        assert not ignored(kept, patterns), kept
        assert (REPO / kept).exists(), kept


# ---------------------------------------------------------------- the install steps


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """ilucid's wheel, built as the image's first stage builds it."""
    work = tmp_path_factory.mktemp("wheel")
    context = copy_context(work / "context")
    build = [sys.executable, "-m", "build", "--wheel", "--outdir", str(work / "dist"), "."]
    try:
        import build as _build  # noqa: F401
    except ImportError:  # the same backend through pip, where `build` is not installed
        build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(work / "dist"), "."]
    done = subprocess.run(
        build, cwd=context, capture_output=True, text=True, timeout=600, env=_clean_env()
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (found,) = (work / "dist").glob("ilucid-*.whl")
    yield found


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without what points Python at this checkout or the test venv."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not key.startswith("PYTEST")
    }
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env.update(extra)
    return env


def _install(prefix: Path, wheel: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(INSTALL_SCRIPT), str(prefix), str(wheel.parent), "kubernetes"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd="/",
        env=_clean_env(PYTHON=sys.executable, **env),
    )


def _seeing_test_site_packages(prefix: Path) -> None:
    """A virtual environment whose path ends with the test venv's site-packages (a plain
    path entry: its .pth files, an editable ilucid's among them, are not run)."""
    subprocess.run([sys.executable, "-m", "venv", str(prefix)], check=True, timeout=300)
    (site,) = prefix.glob("lib/python3*/site-packages")
    parent = next(p for p in sys.path if p.endswith("site-packages") and sys.prefix in p)
    (site / "zz-test-site-packages.pth").write_text(parent + "\n", encoding="utf-8")


def test_install_steps_run_ilucid_from_the_wheel(wheel: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "opt-ilucid"
    done = _install(prefix, wheel)
    fresh = done.returncode == 0 or not OFFLINE.search(done.stdout + done.stderr)
    if not fresh:
        warnings.warn(
            "the package index cannot be reached: install-runtime.sh ran into a virtual"
            " environment that sees the test environment's site-packages",
            stacklevel=1,
        )
        shutil.rmtree(prefix)
        _seeing_test_site_packages(prefix)
        done = _install(prefix, wheel, PIP_NO_INDEX="1")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    # the script's last word is `ilucid --version`, run from the new environment
    assert done.stdout.strip().splitlines()[-1].startswith(f"ilucid {VERSION}, core: ")

    if fresh:  # nothing but what the script installed: no system or test site-packages
        config = (prefix / "pyvenv.cfg").read_text("utf-8")
        assert "include-system-site-packages = false" in config
    # ilucid is the wheel's copy, not this checkout's sources; the console script works
    where = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import ilucid, kubernetes; print(ilucid.__file__)"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env=_clean_env(),
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(prefix), where.stdout
    version = subprocess.run(
        [str(prefix / "bin" / "ilucid"), "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env=_clean_env(),
    )
    assert version.stdout.startswith(f"ilucid {VERSION}"), version.stdout + version.stderr
    if shutil.which("cc") or shutil.which("gcc"):  # the builder stage installs gcc
        assert "core: compiled (mypyc, " in version.stdout, version.stdout


def test_install_script_refuses_a_folder_without_one_wheel(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = subprocess.run(
        ["sh", str(INSTALL_SCRIPT), str(tmp_path / "venv"), str(tmp_path / "empty")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "expected exactly one ilucid-*.whl" in done.stderr
    assert not (tmp_path / "venv").exists()


# ---------------------------------------------------------------- the image


def _builder() -> str | None:
    return next((tool for tool in ("buildah", "podman") if shutil.which(tool)), None)


def _base_image() -> str:
    found = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", CONTAINERFILE.read_text("utf-8"), re.M)
    assert found, f"{CONTAINERFILE}: no ARG PYTHON_IMAGE=<base image>"
    return found[1]


@pytest.mark.timeout(3600)
def test_image_builds_and_runs_as_its_uid(tmp_path: Path) -> None:
    tool = _builder()
    if tool is None:
        pytest.skip("neither buildah nor podman is installed: no image is built here")
    storage = [
        f"--root={tmp_path / 'storage'}",
        f"--runroot={tmp_path / 'run'}",
        "--storage-driver=vfs",
    ]

    def run(*args: str, timeout: int = 1800) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [tool, *storage, *args], capture_output=True, text=True, timeout=timeout
        )

    base = _base_image()
    pulled = run("pull", base, timeout=300)
    if pulled.returncode != 0:
        last = (pulled.stderr.strip().splitlines() or ["(no message)"])[-1]
        pytest.skip(f"{tool} cannot pull the base image {base}: {last}")
    context = copy_context(tmp_path / "context")
    built = run(
        "build",
        "--isolation=chroot",
        "-f",
        str(context / "deploy" / "container" / "Containerfile"),
        "-t",
        IMAGE,
        str(context),
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    if tool == "buildah":
        container = run("from", "--name=ilucid-test", IMAGE).stdout.strip()
        uid = run("run", "--isolation=chroot", container, "--", "id", "-u")
        version = run("run", "--isolation=chroot", container, "--", "ilucid", "--version")
    else:
        uid = run("run", "--rm", "--entrypoint=id", IMAGE, "-u")
        version = run("run", "--rm", IMAGE, "--version")
    assert uid.stdout.strip() == str(UID), uid.stdout + uid.stderr
    assert version.stdout.startswith(f"ilucid {VERSION}, core: "), version.stdout + version.stderr

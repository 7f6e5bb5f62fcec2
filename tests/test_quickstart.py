"""The README's quick start, tested as written (issue 29), as root and as an
unprivileged user.

Each run copies the checkout as a clean clone would have it (the files ``git ls-files
-co --exclude-standard`` lists, uncommitted work included; no ``.venv``, no build
outputs) into a fresh directory every account may enter, runs ``make serve PORT=N``
there (it creates ``.venv``, installs, compiles with mypyc and starts the service),
waits for the dashboard's URL, then from the copy runs the README's Live service
commands with the admin token exported as the README says: ``ilucid submit --gpus 1
-- sleep 1`` and ``ilucid submit --gpus 2 --class training --estimate 3600 --
python3 train.py`` with a small ``train.py`` (it reads a file beside it and writes to
both streams). Each job must succeed exactly once (one launch in its story, nothing
vanished), its output must be in ``ilucid logs`` and ``ilucid explain`` must tell its
story. Ctrl-C (SIGINT to the foreground process group, as a terminal sends it) must
stop the service.

As root (as CI runs), the service runs as root; the unprivileged run creates the
system account ``ilucid-qs`` if it is missing and runs everything as it. Run as
another user, that user is the unprivileged one and the root run is skipped.

``make serve`` installs from the package index (PyPI) each time: this takes minutes.
The unprivileged run keeps its pip cache in ``/var/tmp`` (``PIP_CACHE_DIR``), so a
second run on one machine is quicker; nothing of ``make serve``'s own steps is
skipped.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
USER = "ilucid-qs"
#: make serve from scratch: venv, pip install of the dev extras, mypyc (about 1.5 min)
SERVE_START_S = 1200
#: from submission to both jobs' ends (sleep 1 and a python3 script)
JOBS_END_S = 180

pytestmark = [pytest.mark.timeout(1500), pytest.mark.xdist_group("quickstart")]

TRAIN_PY = '''\
"""A stand-in for a training script: reads a file beside it, writes to both streams."""
import sys
from pathlib import Path

data = Path("train-data.txt").read_text().strip()
print(f"train.py: read {data!r} in {Path.cwd()}")
print("train.py: a warning on stderr", file=sys.stderr)
'''
TRAIN_DATA = "epoch 1 of 1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _copy_checkout(to: Path) -> None:
    """The checkout's files as a clone would have them, uncommitted work included,
    readable by every account (dirs 0755, files 0644 or 0755)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    to.mkdir(mode=0o755)
    for raw in filter(None, listed):
        name = os.fsdecode(raw)
        source, target = ROOT / name, to / name
        if not source.is_symlink() and not source.is_file():
            continue  # deleted from the work tree, or a submodule a clone would leave empty
        for parent in reversed(target.relative_to(to).parents):
            folder = to / parent
            if not folder.exists():
                folder.mkdir(mode=0o755)
                folder.chmod(0o755)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
            continue
        shutil.copyfile(source, target)
        target.chmod(0o755 if os.access(source, os.X_OK) else 0o644)


def _pip_settings() -> dict[str, str]:
    """This account's pip settings (``pip config list``) as ``PIP_*`` variables, so an
    account that cannot read its files installs from the same indexes."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    found = {}
    for line in listed.splitlines():
        match = re.fullmatch(r"global\.([\w-]+)='(.*)'", line.strip())
        if match:
            found["PIP_" + match[1].upper().replace("-", "_")] = match[2]
    return found


def _user_environment(extra: dict[str, str]) -> dict[str, str]:
    """A fresh shell's environment: none of this test run's venv, pytest, make or
    ilucid variables (the commands must find the service and token as the README
    says)."""
    dropped = ("ILUCID_", "PYTEST_", "MAKE", "MFLAGS", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    ours = {str(ROOT), sys.prefix}
    env["PATH"] = os.pathsep.join(
        entry
        for entry in env.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(os.pathsep)
        if entry and not any(entry == o or entry.startswith(o + os.sep) for o in ours)
    )
    env.update(extra)
    return env


def _unprivileged_account() -> pwd.struct_passwd:
    """The system account the unprivileged run uses (created when missing)."""
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        pass
    if shutil.which("useradd") is None:
        pytest.skip(f"no account {USER} and no useradd to create it")
    nologin = shutil.which("nologin") or "/bin/false"
    subprocess.run(
        ["useradd", "--system", "--user-group", "--no-create-home", "--shell", nologin, USER],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam(USER)


def _chown_tree(top: Path, uid: int, gid: int) -> None:
    os.chown(top, uid, gid, follow_symlinks=False)
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)


@dataclass
class QuickStart:
    """One run of the quick start: the copy, the account and ``make serve``."""

    copy: Path
    log: Path
    env: dict[str, str]
    account: pwd.struct_passwd | None  # None: the current account
    port: int = field(default_factory=_free_port)
    serve: subprocess.Popen[bytes] | None = None

    def as_user(self, command: Sequence[str]) -> list[str]:
        if self.account is None:
            return list(command)
        return [
            "setpriv",
            f"--reuid={self.account.pw_uid}",
            f"--regid={self.account.pw_gid}",
            "--init-groups",
            "--",
            *command,
        ]

    def log_tail(self, chars: int = 6000) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"
        return text[-chars:]

    def diagnostics(self) -> str:
        return f"\n--- make serve PORT={self.port}'s output (tail) ---\n{self.log_tail()}"

    def start(self) -> None:
        """``make serve PORT=N`` in the copy, in its own process group (as a terminal's
        foreground job), until it prints the dashboard's URL."""
        with self.log.open("wb") as out:
            self.serve = subprocess.Popen(
                self.as_user(["make", "serve", f"PORT={self.port}"]),
                cwd=self.copy,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + SERVE_START_S
        while "dashboard: http://" not in self.log_tail(100_000):
            if self.serve.poll() is not None:
                raise AssertionError(
                    f"make serve ended ({self.serve.returncode}) before it printed the"
                    f" dashboard's URL{self.diagnostics()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"make serve printed no dashboard URL within {SERVE_START_S} s"
                    f"{self.diagnostics()}"
                )
            time.sleep(1.0)
        assert f"dashboard: http://127.0.0.1:{self.port}/" in self.log_tail(100_000), (
            self.diagnostics()
        )

    def shell(self, *command: str, check: bool = True) -> str:
        """A README command, run from the copy after ``export ILUCID_TOKEN=$(cat
        .ilucid/admin.token)``, as the account that runs the service."""
        script = 'export ILUCID_TOKEN=$(cat .ilucid/admin.token) && exec "$@"'
        done = subprocess.run(
            self.as_user(["sh", "-c", script, "sh", *command]),
            cwd=self.copy,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
                f"{self.diagnostics()}"
            )
        return done.stdout

    def states(self) -> dict[str, str]:
        """Each job's state, from ``ilucid jobs``."""
        rows = self.shell(".venv/bin/ilucid", "jobs").splitlines()
        state = rows[0].split().index("STATE")  # every cell before it is one word
        return {
            cells[0]: cells[state]
            for cells in (row.split() for row in rows[2:])
            if len(cells) > state and re.fullmatch(r"j\d+", cells[0])
        }

    def interrupt(self) -> None:
        """Ctrl-C: SIGINT to the foreground process group; it must be gone in 30 s."""
        assert self.serve is not None
        os.killpg(self.serve.pid, signal.SIGINT)
        try:
            self.serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"make serve still runs 30 s after Ctrl-C{self.diagnostics()}"
            ) from None
        deadline = time.monotonic() + 10
        while _group_alive(self.serve.pid):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"a process of make serve's group outlived Ctrl-C by 10 s{self.diagnostics()}"
                )
            time.sleep(0.2)

    def kill(self) -> None:
        if self.serve is not None and _group_alive(self.serve.pid):
            os.killpg(self.serve.pid, signal.SIGKILL)
            self.serve.wait(timeout=30)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.fixture
def world_readable_folder() -> Iterator[Path]:
    """A fresh folder every account may enter (not under a 0700 temporary directory)."""
    folder = Path(tempfile.mkdtemp(prefix="ilucid-quickstart-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _prepare(kind: str, base: Path) -> QuickStart:
    copy = base / "ilucid"
    _copy_checkout(copy)
    (copy / "train.py").write_text(TRAIN_PY)
    (copy / "train-data.txt").write_text(TRAIN_DATA + "\n")
    for made in ("train.py", "train-data.txt"):
        (copy / made).chmod(0o644)
    if kind == "root" or os.geteuid() != 0:
        return QuickStart(copy, base / "serve.log", _user_environment({}), None)
    account = _unprivileged_account()
    home = base / "home"
    home.mkdir(mode=0o755)
    # pip's cache for this account, kept between runs on one machine; owned by it
    cache = Path("/var/tmp") / f"ilucid-quickstart-pip-cache-{USER}"
    cache.mkdir(mode=0o755, exist_ok=True)
    for tree in (copy, home, cache):
        _chown_tree(tree, account.pw_uid, account.pw_gid)
    extra = {
        **_pip_settings(),
        "HOME": str(home),
        "USER": USER,
        "LOGNAME": USER,
        "PIP_CACHE_DIR": str(cache),
    }
    return QuickStart(copy, base / "serve.log", _user_environment(extra), account)


@pytest.mark.parametrize("kind", ["root", "unprivileged"])
def test_the_readme_quick_start_works_as_written(kind: str, world_readable_folder: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("the quick start test copies a git checkout: this is not one")
    if kind == "root" and os.geteuid() != 0:
        pytest.skip("the root run needs root (CI runs as root); the unprivileged run is this one")
    if kind == "unprivileged" and os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("no setpriv (util-linux) to run as an unprivileged account")
    began = time.monotonic()
    run = _prepare(kind, world_readable_folder)
    try:
        run.start()
        started = time.monotonic() - began
        # the README's Live service commands, from the copy (a second terminal)
        sleeper = run.shell(".venv/bin/ilucid", "submit", "--gpus", "1", "--", "sleep", "1").strip()
        trainer = run.shell(
            ".venv/bin/ilucid",
            *("submit", "--gpus", "2", "--class", "training", "--estimate", "3600"),
            *("--", "python3", "train.py"),
        ).strip()
        jobs = [sleeper, trainer]
        assert all(re.fullmatch(r"j\d+", j) for j in jobs), jobs
        run.shell(".venv/bin/ilucid", "queue")
        run.shell(".venv/bin/ilucid", "nodes")
        deadline = time.monotonic() + JOBS_END_S
        states = run.states()
        while not all(states.get(j) in ("succeeded", "failed", "cancelled") for j in jobs):
            if time.monotonic() > deadline:
                break
            time.sleep(1.0)
            states = run.states()
        stories = {j: run.shell(".venv/bin/ilucid", "explain", j) for j in jobs}
        logs = {j: run.shell(".venv/bin/ilucid", "logs", j) for j in jobs}
        for job in jobs:
            said = f"\n--- ilucid explain {job} ---\n{stories[job]}\n--- ilucid logs {job} ---\n"
            said += logs[job] + run.diagnostics()
            assert states.get(job) == "succeeded", f"{job} is {states.get(job)}{said}"
            story = stories[job]
            assert story.startswith(f"{job}: succeeded"), said
            assert "  story, by what caused each move:" in story, said
            assert story.count("[backend: launched]") == 1, f"not launched exactly once{said}"
            assert "vanished" not in story and "launch failed" not in story, said
            assert story.count("-> succeeded [observed: exit]") == 1, said
        # sleep writes nothing; both streams are shown, each labelled, each empty
        quiet = "==> stdout <==\n(empty)\n==> stderr <==\n(empty)\n"
        assert logs[sleeper] == quiet, logs[sleeper]
        where = run.copy.resolve()
        assert logs[trainer] == (
            f"==> stdout <==\ntrain.py: read {TRAIN_DATA!r} in {where}\n"
            "==> stderr <==\ntrain.py: a warning on stderr\n"
        ), logs[trainer] + run.diagnostics()
        run.interrupt()
        said = run.log_tail(100_000)
        assert "stopping: no job is running" in said, run.diagnostics()
        print(
            f"quick start as {kind}: make serve up in {started:.0f} s,"
            f" all done in {time.monotonic() - began:.0f} s"
        )
    except AssertionError:
        raise  # its message ends with the service's output
    except BaseException:
        print(run.diagnostics())
        raise
    finally:
        run.kill()

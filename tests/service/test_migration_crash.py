"""Migrations cannot half-apply: a start killed during its migrations never bricks the
data directory (issue 30, finding 2).

Before, ``sqlite3`` committed every DDL statement on its own, so a ``kill -9`` during
a first start left, in 7 of 70 tries, a database with a migration's changes but not
its version stamp, and every later start failed (``table jobs already exists``,
``duplicate column name: stimulus``). Three kinds of kill here, each followed by a
restart that must come up with the schema of a database migrated once to head:

* **at every step of every migration** (:data:`ilucid.service.faults.MIGRATION_STEPS`
  of each revision the scripts hold, :data:`REPEATS` times each), through the
  ``migrate()`` that ``ilucid serve`` calls, in a child forked by
  ``migrate_forker.py``; the restart migrates again, and once per migration it is a
  real ``ilucid serve`` that must answer ``/healthz``;
* **at random**: a real ``ilucid serve`` SIGKILLed a random 0-1.5 s after it started
  (longer where a first start takes longer to migrate), every other kill aimed at the
  migrations (the database file appeared, or the time a first start migrates,
  measured first), into an empty data directory and into one whose database is at an
  older revision; the restart is a real ``ilucid serve`` that must answer ``/healthz``;
* **on PostgreSQL**, at every step of every migration once.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import httpx
import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

import ilucid
from ilucid.service.db import MIGRATIONS, migrate
from ilucid.service.faults import MIGRATION_STEPS, migration_point

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from serve_helpers import free_port, serve_command  # noqa: E402

#: kills at each step of each migration
REPEATS = 3
#: random kills of a real ``ilucid serve``, into an empty data directory and into one
#: at an older revision
RANDOM_EMPTY = 10
RANDOM_OLDER = 10
#: the latest moment of a random kill, s after the start: a first start has migrated
#: within it on an idle machine (on a busy one the window grows to cover the migrations)
RANDOM_UNTIL_S = 1.5
KILLED = -signal.SIGKILL

pytestmark = pytest.mark.xdist_group("crash")  # they start servers: not beside the other crash test


def _env() -> dict[str, str]:
    """This checkout's ``ilucid`` for every child, whatever the venv has installed."""
    source = str(Path(ilucid.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": source, "ILUCID_CRASH_AT": ""}


def _config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def _revisions() -> list[str]:
    """Every revision the scripts hold, oldest first (0011 and later included)."""
    script = ScriptDirectory.from_config(_config("sqlite://"))
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def _schema(path: Path) -> list[tuple[str, ...]]:
    """Tables, indexes and their SQL, and the recorded version: equal for two databases
    only when both are exactly at the same revision."""
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute(
            "select type, name, tbl_name, sql from sqlite_master"
            " where name not like 'sqlite_%' order by type, name"
        ).fetchall()
        versions = db.execute("select version_num from alembic_version").fetchall()
    return [
        *((kind, name, table, " ".join((sql or "").split())) for kind, name, table, sql in rows),
        ("version", *sorted(v for (v,) in versions)),
    ]


def _head_schema(folder: Path) -> list[tuple[str, ...]]:
    folder.mkdir()
    migrate(f"sqlite:///{folder / 'ilucid.db'}")
    return _schema(folder / "ilucid.db")


class Forker:
    """``migrate_forker.py``: one forked child per migration, killed where it is armed."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "migrate_forker.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def migrate(self, url: str, point: str = "-") -> tuple[int, str]:
        """The child's exit code (``KILLED`` at an armed point) and its error, if any."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{point} {url}\n")
        self.process.stdin.flush()
        code, _, error = self.process.stdout.readline().rstrip("\n").partition("\t")
        return int(code), error

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@contextmanager
def forker(env: dict[str, str]) -> Iterator[Forker]:
    running = Forker(env)
    try:
        yield running
    finally:
        running.close()


def _serve_comes_up(data: Path, env: dict[str, str]) -> str | None:
    """None once a real ``ilucid serve`` on ``data`` answers ``/healthz``, else why not
    (what it printed when it exited)."""
    port = free_port()
    process = subprocess.Popen(
        serve_command(data, port, 1, 0.2),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    problem: str | None = "no answer from /healthz within 60 s"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                problem = None
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    process.kill()
    output = process.communicate()[0]
    if problem is not None and process.returncode != KILLED:
        problem = f"exited {process.returncode}: {output.strip()[-400:]}"
    return problem


def _at_head(path: Path, head: list[tuple[str, ...]]) -> str | None:
    found = _schema(path)
    return None if found == head else f"schema differs from head: {sorted(set(found) ^ set(head))}"


@pytest.fixture
def memory_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder in memory (tmpfs) where there is one, else ``tmp_path``: a kill -9 leaves
    the same file either way (a process's writes outlive it in the page cache), and
    SQLite's fsyncs, a fifth of a second per first start on this disk, cost nothing."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="ilucid-migrations-", dir=shm))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_kill_at_every_step_of_every_migration_bricks_nothing(memory_dir: Path) -> None:
    tmp_path = memory_dir
    revisions = _revisions()
    head = _head_schema(tmp_path / "reference")
    env = _env()
    kills: Counter[str] = Counter()
    unreached: list[str] = []
    bricked: list[str] = []
    real_restarts = 0
    with forker(env) as child:
        for repeat in range(REPEATS):
            for index, revision in enumerate(revisions):
                for step in MIGRATION_STEPS:
                    point = migration_point(revision, step)
                    data = tmp_path / f"{point}-{repeat}"
                    data.mkdir()
                    url = f"sqlite:///{data / 'ilucid.db'}"
                    code, error = child.migrate(url, point)
                    if code != KILLED:
                        unreached.append(f"{point}: exit {code} {error}".strip())
                        continue
                    kills[step] += 1
                    # once per migration the restart is the real service, at a step that
                    # moves on with each migration
                    if repeat == 0 and MIGRATION_STEPS.index(step) == index % len(MIGRATION_STEPS):
                        real_restarts += 1
                        problem = _serve_comes_up(data, env)
                    else:
                        code, error = child.migrate(url)
                        problem = f"restart exited {code}: {error}" if code else None
                    problem = problem or _at_head(data / "ilucid.db", head)
                    if problem:
                        bricked.append(f"{point} (#{repeat + 1}): {problem}")
                    shutil.rmtree(data)
    total = sum(kills.values())
    print(
        f"kills at migration steps: {total} ({dict(kills)}) over {len(revisions)} migrations,"
        f" {real_restarts} restarts through ilucid serve; bricked: {len(bricked)};"
        f" points never reached: {len(unreached)}"
    )
    assert not unreached, f"crash points never reached: {unreached}"
    assert not bricked, f"{len(bricked)} of {total} kills bricked the data directory: {bricked}"
    assert total == REPEATS * len(revisions) * len(MIGRATION_STEPS) >= 100


def _landed(data: Path, start: str | None, head: str) -> str:
    """Where a random kill landed, judged from the files alone (the restart must be the
    first to open the database, so a hot journal is rolled back by the service)."""
    path = data / "ilucid.db"
    if not path.exists():
        return "before the database existed"
    journal = data / "ilucid.db-journal"
    if journal.exists() and journal.stat().st_size > 0:
        return "inside a migration's transaction"
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            found = db.execute("select version_num from alembic_version").fetchone()
    except sqlite3.Error:
        found = None
    version = found[0] if found else None
    if version == head:
        return "after the last migration"
    return "before migrating" if version == start else "between migrations"


def _migration_window(data: Path, env: dict[str, str]) -> tuple[float, float]:
    """When a first start of ``ilucid serve`` migrates, here and now (s after it starts):
    from its database file appearing to its admin token, the step after migrating."""
    data.mkdir()
    database, token = data / "ilucid.db", data / "admin.token"
    started = time.monotonic()
    process = subprocess.Popen(
        serve_command(data, free_port(), 1, 0.2),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    first = None
    while not token.exists() and time.monotonic() < started + 60:
        assert process.poll() is None, "a first start failed"
        if first is None and database.exists():
            first = time.monotonic() - started
        time.sleep(0.005)
    took = time.monotonic() - started
    process.kill()
    process.wait()
    return (took if first is None else first), took


def test_random_kills_of_first_starts_and_upgrades_brick_nothing(tmp_path: Path) -> None:
    rng = random.Random(30)
    revisions = _revisions()
    head = _head_schema(tmp_path / "reference")
    env = _env()
    begins_s, migrated_s = _migration_window(tmp_path / "timing", env)
    until_s = max(RANDOM_UNTIL_S, 1.25 * migrated_s)
    older = {}  # a database at each older revision, copied into a data directory per kill
    for revision in revisions[:-1]:
        older[revision] = tmp_path / f"at-{revision}.db"
        command.upgrade(_config(f"sqlite:///{older[revision]}"), revision)
    kills: Counter[str] = Counter()
    landed: Counter[str] = Counter()
    bricked: list[str] = []
    kinds = ["empty"] * RANDOM_EMPTY + ["older"] * RANDOM_OLDER
    for number, kind in enumerate(kinds):
        data = tmp_path / f"random-{number}"
        data.mkdir()
        start = None
        if kind == "older":
            start = rng.choice(revisions[:-1])
            shutil.copy(older[start], data / "ilucid.db")
        aimed = number % 2 == 0  # every other kill aims at the migrations
        process = subprocess.Popen(
            serve_command(data, free_port(), 1, 0.2),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        started = time.monotonic()
        if aimed and kind == "empty":
            # from the moment the database file appears (its migrations begin)
            while not (data / "ilucid.db").exists() and time.monotonic() < started + until_s:
                time.sleep(0.001)
            time.sleep(rng.uniform(0, migrated_s - begins_s))
        else:
            time.sleep(rng.uniform(*((begins_s, migrated_s) if aimed else (0, until_s))))
        process.send_signal(signal.SIGKILL)
        process.wait()
        after_s = time.monotonic() - started
        kills[kind] += 1
        landed[_landed(data, start, revisions[-1])] += 1
        problem = _serve_comes_up(data, env) or _at_head(data / "ilucid.db", head)
        if problem:
            bricked.append(
                f"{kind} from {start or 'nothing'}, killed at {after_s:.2f} s: {problem}"
            )
        shutil.rmtree(data)
    total = sum(kills.values())
    print(
        f"random kills of ilucid serve: {total} ({dict(kills)}), 0-{until_s:.2f} s after the"
        f" start (half of them while migrating: {begins_s:.2f}-{migrated_s:.2f} s for a first"
        f" start); landed {dict(landed)};"
        f" bricked: {len(bricked)}"
    )
    assert not bricked, f"{len(bricked)} of {total} kills bricked the data directory: {bricked}"
    assert total == RANDOM_EMPTY + RANDOM_OLDER


class Postgres:
    """A database of its own on the fixture's server, emptied before each kill."""

    def __init__(self, server_url: str, name: str) -> None:
        self.admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
        with self.admin.connect() as connection:
            connection.execute(text(f'create database "{name}"'))
        # the server is never killed here, only its clients: no fsync needed per commit
        self.url = server_url.replace("@/postgres?", f"@/{name}?") + (
            "&options=-csynchronous_commit%3Doff"
        )
        self.engine = create_engine(self.url, isolation_level="AUTOCOMMIT")

    def empty(self) -> None:
        with self.engine.connect() as connection:
            connection.execute(text("drop schema public cascade"))
            connection.execute(text("create schema public"))

    def state(self) -> tuple[list[str], list[str]]:
        """Its tables, their columns and the recorded version."""
        with self.engine.connect() as connection:
            found = inspect(connection)
            tables = sorted(found.get_table_names())
            columns = sorted(f"{t}.{c['name']}" for t in tables for c in found.get_columns(t))
            version = connection.execute(text("select version_num from alembic_version")).all()
        return tables + [f"version {v}" for (v,) in version], columns

    def close(self) -> None:
        self.engine.dispose()
        self.admin.dispose()


def test_a_kill_at_every_migration_step_on_postgresql_bricks_nothing(
    postgres_url: str,
) -> None:
    revisions = _revisions()
    db = Postgres(postgres_url, "migration_kills")
    bricked: list[str] = []
    kills = 0
    try:
        migrate(db.url)
        head = db.state()
        with forker(_env()) as child:
            for revision in revisions:
                for step in MIGRATION_STEPS:
                    point = migration_point(revision, step)
                    db.empty()
                    code, error = child.migrate(db.url, point)
                    assert code == KILLED, f"{point} was never reached: exit {code} {error}"
                    kills += 1
                    code, error = child.migrate(db.url)
                    if code != 0 or db.state() != head:
                        bricked.append(f"{point}: restart exited {code} {error}")
    finally:
        db.close()
    print(f"kills at migration steps on PostgreSQL: {kills}; bricked: {len(bricked)}")
    assert not bricked, f"{len(bricked)} of {kills} kills bricked the database: {bricked}"

"""Fixtures shared by every test folder."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def job_scratch() -> Iterator[Path]:
    """A folder the jobs a test runs may write to.

    Run as root (CI), the local backend runs jobs as an unprivileged account,
    which cannot enter pytest's private ``tmp_path``: job output goes here.
    """
    folder = Path(tempfile.mkdtemp(prefix="ilucid-jobs-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def own_config_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Each test's own empty ``$XDG_CONFIG_HOME``: the services tests start write their
    client settings there (``ilucid serve`` writes ``ilucid/client.toml``), never into
    the home of whoever runs the tests, and no test reads another's."""
    folder = tmp_path_factory.mktemp("config-home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    return folder

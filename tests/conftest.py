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

"""``ilucid serve`` writes the client settings only into its own user's folders."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ilucid.cli.user_config import read_user_config, write_user_config


def test_written_0600_and_a_hand_added_token_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "ilucid" / "client.toml"
    path.parent.mkdir(parents=True)
    path.write_text('token = "mine"\n')
    assert write_user_config("http://127.0.0.1:8801", tmp_path / "admin.token", path) == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_user_config(path) == {
        "url": "http://127.0.0.1:8801",
        "token_file": str(tmp_path / "admin.token"),
        "token": "mine",
    }


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_never_into_another_users_home(tmp_path: Path) -> None:
    """Root under ``sudo`` with the caller's HOME: nothing of root's goes there."""
    home = tmp_path / "alice"
    home.mkdir()
    os.chown(home, 65534, 65534)
    path = home / ".config" / "ilucid" / "client.toml"
    assert write_user_config("http://127.0.0.1:8801", tmp_path / "admin.token", path) is None
    assert not (home / ".config").exists()

"""The user-level client settings: where this user's ``ilucid serve`` listens, and where
its admin token is, so the client commands work from any directory.

``ilucid serve`` writes ``$XDG_CONFIG_HOME/ilucid/client.toml`` (default
``~/.config/ilucid/client.toml``) once it listens, into the configuration of the user
it runs as, never anyone else's; the client commands read it after ``--url`` /
``ILUCID_URL`` / ``--token`` / ``ILUCID_TOKEN`` and the data directory here. The file
names the token's file rather than copying the token: the token stays where the
service keeps it, readable by the service's user alone. A user who holds their own
(non-admin) token may add ``token = "..."`` to the file by hand (it is kept 0600).
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

__all__ = ["USER_CONFIG_FILE", "read_user_config", "user_config_path", "write_user_config"]

#: the file under ``$XDG_CONFIG_HOME/ilucid/``
USER_CONFIG_FILE = "client.toml"


def user_config_path() -> Path:
    """``$XDG_CONFIG_HOME/ilucid/client.toml``; a relative or empty XDG_CONFIG_HOME is
    ignored, as the XDG base directory specification says: ``~/.config`` then."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / "ilucid" / USER_CONFIG_FILE


def read_user_config(path: Path | None = None) -> dict[str, str]:
    """The file's string settings (``url``, ``token_file``, ``token``); none when it is
    absent. A file that is not TOML is an error naming it (and its line)."""
    path = path or user_config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not TOML: {exc}") from None
    return {key: value for key, value in data.items() if isinstance(value, str)}


def _owned_by_me(path: Path) -> bool:
    """The nearest existing folder at or above ``path`` belongs to this (effective) user."""
    for folder in (path, *path.parents):
        try:
            return folder.stat().st_uid == os.geteuid()
        except FileNotFoundError:
            continue
        except OSError:  # a folder this user may not even look into is not theirs
            return False
    return False


def write_user_config(url: str, token_file: Path, path: Path | None = None) -> Path | None:
    """Write ``url`` and ``token_file`` into this user's client settings (0600, in a 0700
    folder), keeping any ``token`` line the user added; the path written, or None when
    the folder belongs to another user (root under ``sudo`` with the caller's HOME: no
    file of root's goes into another user's home)."""
    path = path or user_config_path()
    if not _owned_by_me(path.parent) or (path.exists() and path.stat().st_uid != os.geteuid()):
        return None
    kept = {k: v for k, v in read_user_config(path).items() if k not in ("url", "token_file")}
    settings = {"url": url, "token_file": str(token_file), **kept}
    lines = [
        "# written by `ilucid serve` when it listens: where the client commands find this",
        "# user's service and its admin token (read after --url/ILUCID_URL, --token/",
        "# ILUCID_TOKEN and the data directory ./.ilucid)",
        *(f"{key} = {json.dumps(value)}" for key, value in settings.items()),
    ]
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    os.replace(partial, path)
    return path

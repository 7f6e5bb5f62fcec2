"""The ``ilucid`` command line: one module per command group, one dispatch table.

Each command module lists its subcommands as :class:`~ilucid.cli.common.Command`
entries (name, help, ``add_arguments``, ``run``); :mod:`ilucid.cli.app` builds
the parser from them and dispatches by name.
"""

from __future__ import annotations

from ilucid.cli.app import main

__all__ = ["main"]

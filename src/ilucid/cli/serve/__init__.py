"""``ilucid serve`` and the commands run on the service's own host: ``token`` and
``slurm-release-held``. The commands that talk to a running service are in
:mod:`ilucid.cli.client`.
"""

from __future__ import annotations

import argparse
from typing import Any

from ilucid.cli.common import Command, add_commands
from ilucid.cli.serve.host import (
    add_release_held_arguments,
    add_token_arguments,
    release_held,
    token,
)
from ilucid.cli.serve.options import add_serve_arguments

__all__ = ["COMMANDS", "add_service_commands"]


def serve(args: argparse.Namespace) -> int:
    """``ilucid serve`` (:func:`ilucid.cli.serve.run.serve`), imported when it runs: the
    service's modules cost every other command a third of a second to import."""
    from ilucid.cli.serve.run import serve as run

    return run(args)


COMMANDS = (
    Command(
        "serve",
        "run the live scheduler: jobs on this host (the default), on Slurm or on Kubernetes",
        add_serve_arguments,
        serve,
    ),
    Command(
        "slurm-release-held",
        "fail-open: hand every job ilucid holds in Slurm to Slurm's own scheduler",
        add_release_held_arguments,
        release_held,
    ),
    Command(
        "token",
        "create an API token (printed once), or revoke a user's tokens",
        add_token_arguments,
        token,
    ),
)


def add_service_commands(sub: Any) -> None:
    """``serve``, ``slurm-release-held`` and ``token`` on ``sub`` (an ``add_subparsers()``
    action): how a deployment's command line is checked against this parser."""
    add_commands(sub, COMMANDS)

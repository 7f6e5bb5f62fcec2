"""What every command module shares: the command entry, its help formatter, argument
types, how a client finds the service and its token, and the user's error."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from ilucid.cli.user_config import read_user_config, user_config_path
from ilucid.core import PROFILES
from ilucid.core.policies import is_known
from ilucid.settings.profile_file import is_profile_file
from ilucid.traces import Trace, trace_dir
from ilucid.traces.named import SYNTHETIC, load_named

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_DATA",
    "DEFAULT_PORT",
    "DEFAULT_URL",
    "URL_FILE",
    "CliError",
    "Command",
    "DefaultsFormatter",
    "add_commands",
    "add_service_options",
    "estimate_seconds",
    "generated_note",
    "policy_list",
    "positive_float",
    "positive_int",
    "print_error",
    "printable",
    "say_generated",
    "service_address",
    "service_client",
    "service_url",
    "stored_token",
    "trace_or_generated",
]

#: where ``ilucid serve`` listens, keeps its state, and where the client commands find it
DEFAULT_PORT = 8787
DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
DEFAULT_DATA = Path(".ilucid")
#: the file in the data directory where ``ilucid serve`` writes the URL it listens on
URL_FILE = "url"
#: this user's client settings as help texts name them (:mod:`ilucid.cli.user_config`)
USER_CONFIG_SHOWN = "$XDG_CONFIG_HOME/ilucid/client.toml (default: ~/.config/ilucid/)"


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


@dataclass(frozen=True)
class Command:
    """One ``ilucid`` subcommand: its parser's name, help and arguments, and what it runs.

    ``run`` returns the exit status; a :class:`CliError`, ``ValueError`` or
    ``OSError`` it raises is printed as one line with exit status 2. A ``hidden``
    command parses and runs but is left out of its parent's ``--help`` (an old name
    kept for one release).
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None
    hidden: bool = False


class DefaultsFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless it has none (None, a flag off)
    or its help already says it (``default:``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or "%(default)" in text
            or "default:" in text
        ):
            return text
        return f"{text} (default: %(default)s)"


def add_commands(sub: Any, commands: Iterable[Command]) -> None:
    """Add each command's parser to ``sub`` (an ``add_subparsers()`` action)."""
    for command in commands:
        # argparse lists a subcommand in its parent's help only when it has a help (which
        # argparse %-formats)
        listed = {} if command.hidden else {"help": command.help.replace("%", "%%")}
        parser = sub.add_parser(
            command.name,
            description=command.description or command.help,
            formatter_class=DefaultsFormatter,
            **listed,
        )
        command.add_arguments(parser)


def add_service_options(parser: argparse.ArgumentParser) -> None:
    """``--url``, ``--token`` and ``--data-dir``: how a client command finds the service."""
    group = parser.add_argument_group("the service")
    group.add_argument(
        "--url",
        help="the service's address (default: ILUCID_URL, else the URL `ilucid serve` wrote"
        f" into --data-dir, else the one in {USER_CONFIG_SHOWN}, else {DEFAULT_URL})",
    )
    group.add_argument(
        "--token",
        default=os.environ.get("ILUCID_TOKEN"),
        help="API token (default: ILUCID_TOKEN, else the admin token in --data-dir, else"
        f" the token {USER_CONFIG_SHOWN} names)",
    )
    group.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA,
        help="the data directory of `ilucid serve` on this host, where the service's URL"
        " and admin token are found",
    )


def service_address(args: argparse.Namespace) -> tuple[str, str]:
    """The service's URL and where it came from: ``--url``, else ``ILUCID_URL``, else the
    URL ``ilucid serve`` wrote into ``--data-dir`` (so ``serve --port 8799`` is found),
    else this user's client settings (:mod:`ilucid.cli.user_config`), else
    :data:`DEFAULT_URL`."""
    if args.url:
        return str(args.url), "--url"
    if os.environ.get("ILUCID_URL"):
        return os.environ["ILUCID_URL"], "ILUCID_URL"
    written = args.data_dir / URL_FILE
    try:
        url = written.read_text(encoding="utf-8").strip()
    except OSError:  # no service started here (or not readable by this user)
        url = ""
    if url:
        return url, str(written.absolute())
    configured = read_user_config().get("url", "").strip()
    if configured:
        return configured, str(user_config_path())
    return DEFAULT_URL, "the default"


def service_url(args: argparse.Namespace) -> str:
    """:func:`service_address`'s URL."""
    return service_address(args)[0]


def _where_to_look(args: argparse.Namespace) -> str:
    """How to point a client command at the service, naming each way."""
    return (
        "give --url or set ILUCID_URL, and --token or ILUCID_TOKEN; or --data-dir DIR,"
        f" the folder `ilucid serve` keeps its state in (here: {args.data_dir.absolute()});"
        f" or start `ilucid serve` as this user once: it writes {user_config_path()}"
    )


def service_client(args: argparse.Namespace, timeout: float = 30.0) -> httpx.Client:
    """A connection to the service with the token; a failure to reach it says which URL
    was tried, where that URL came from, and how to point the command elsewhere."""
    import httpx

    url, origin = service_address(args)
    token = stored_token(args)
    hint = f"the URL came from {origin}; {_where_to_look(args)}"

    class Explained(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            try:
                return super().handle_request(request)
            except httpx.TransportError as exc:
                raise type(exc)(f"{exc} ({hint})", request=request) from exc

    return httpx.Client(
        base_url=url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=timeout,
        transport=Explained(),
    )


#: what a terminal would act on rather than show: C0 and C1 control characters (ESC
#: starts a colour, a cursor move or a title change; CR and LF forge lines), DEL, the
#: Unicode line separators and bidirectional overrides, and lone surrogates (unprintable)
_UNPRINTABLE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _escaped(match: re.Match[str]) -> str:
    """Python's own escape of one character: ``\\n``, ``\\x1b``, ``\\u202e``."""
    return match.group().encode("unicode_escape").decode("ascii")


def printable(value: object) -> str:
    """``value`` as text a terminal only shows: what it would act on is written as its
    escape (``\\x1b``, ``\\n``, ``\\u202e``). Every command prints what users, traces or
    the service chose (a command, a name, a job id, an error) through this, so such text
    can neither recolour nor rewrite the terminal nor forge an output line."""
    return _UNPRINTABLE.sub(_escaped, str(value))


def print_error(message: str) -> None:
    """``ilucid: error: ...`` on stderr, one line (red on a terminal)."""
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    if console.is_terminal:
        console.print(f"[bold red]ilucid: error:[/] {escape(printable(message))}")
    else:
        print(f"ilucid: error: {printable(message)}", file=sys.stderr, flush=True)


def generated_note(what: str) -> str:
    """The one line a command prints when it runs on generated data for want of traces."""
    return f"no traces found (set ILUCID_TRACE_DIR): using generated data: {what}"


def say_generated(what: str) -> None:
    """Print :func:`generated_note` (stdout, before the command's own lines)."""
    print(printable(generated_note(what)), flush=True)


def trace_or_generated(
    given: str | None, default: str, *, limit: int | None = None, seed: int = 0
) -> Trace:
    """``--trace`` as given (a file, a name, or ``synthetic``); left out, ``default`` from
    the trace folder, or, with no trace folder set, the synthetic trace, said on one line.

    A name the user gave still fails without a trace folder: only the default falls back,
    so no one mistakes generated data for the trace they named."""
    if given is None and trace_dir() is None:
        trace = load_named(SYNTHETIC, limit=limit, seed=seed)
        say_generated(trace.source)
        return trace
    return load_named(given or default, limit=limit, seed=seed)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def estimate_seconds(text: str) -> float:
    """``--estimate``: a finite run time of at least 1 s, as the service accepts."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 1.0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 1, got {text}")
    return value


def _named_profiles() -> str:
    return ", ".join(n for n in PROFILES if n != "static-partition")


def policy_list(text: str) -> list[str]:
    """``--policy fifo,sjf,my_site.toml``: known profiles (``static-partition:N`` too) or
    profile files, comma-separated (``simulate`` and ``whatif`` alike)."""
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise argparse.ArgumentTypeError("name at least one policy")
    unknown = [n for n in names if not is_known(n) and not is_profile_file(n)]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown policy {unknown[0]!r}; known: {_named_profiles()}, static-partition:N,"
            " or a profile file (*.toml); `ilucid policies` lists them"
        )
    return names


def _read_token(path: Path, tried: list[str]) -> str:
    """The token in ``path``, or "" with why not added to ``tried``."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        tried.append(f"{path} (no such file)")
        return ""
    except OSError as exc:
        tried.append(f"{path} ({exc.strerror})")
        return ""
    if not token:
        tried.append(f"{path} (empty)")
    return token


def stored_token(args: argparse.Namespace) -> str:
    """``--token`` (or ILUCID_TOKEN), else the admin token ``ilucid serve`` wrote into
    ``--data-dir`` on this host, else this user's client settings (its ``token``, else
    the file its ``token_file`` names). None found: an error naming each place tried."""
    token: str | None = args.token
    if token:
        return token
    tried = ["--token", "ILUCID_TOKEN"]
    token = _read_token((args.data_dir / "admin.token").absolute(), tried)
    if token:
        return token
    config = user_config_path()
    settings = read_user_config(config)
    if settings.get("token", "").strip():
        return settings["token"].strip()
    if settings.get("token_file"):
        token = _read_token(Path(settings["token_file"]), tried)
        if token:
            return token
    elif not config.exists():
        tried.append(f"{config} (no such file)")
    else:
        tried.append(f"{config} (names no token nor token_file)")
    raise ValueError(f"no token: tried {', '.join(tried)}; {_where_to_look(args)}")

"""How ``ilucid serve`` reports: through the standard :mod:`logging` module, set up once
from ``--log-level`` and ``--log-format`` (defaults: ``ILUCID_LOG_LEVEL`` and
``ILUCID_LOG_FORMAT``, else ``info`` and ``text``).

``text`` is what the service has always printed, on stdout: the message alone (a
warning or an error leads with its level), with what a terminal would act on escaped.
``json`` is one object per line for a log collector: ``time`` (ISO 8601, UTC),
``level``, ``logger``, ``message``, and ``job_id`` and ``stimulus_id`` where the record
carries them (``extra=``), ``exception`` with its traceback. ASCII only, so no
character in a message can break a line for a reader that splits on Unicode
separators.

The level applies to ilucid's own loggers; other libraries (uvicorn, SQLAlchemy, the
Kubernetes client) report their warnings and errors only, so ``debug`` never floods
the log with SQL.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import TextIO

from ilucid.cli.common import printable

__all__ = [
    "CONTEXT_FIELDS",
    "FORMATS",
    "LEVELS",
    "JsonFormatter",
    "TextFormatter",
    "add_log_arguments",
    "configure_from",
    "configure_logging",
]

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
FORMATS = ("text", "json")
LEVEL_ENV, FORMAT_ENV = "ILUCID_LOG_LEVEL", "ILUCID_LOG_FORMAT"
#: what a record may carry through ``extra=`` that a JSON line shows as its own field
CONTEXT_FIELDS = ("job_id", "stimulus_id")
#: the name of the handler this module installs (a second setup replaces it)
_HANDLER = "ilucid-console"


def add_log_arguments(group: argparse._ArgumentGroup) -> None:
    """``--log-level`` and ``--log-format``; checked by :func:`configure_from`, so a bad
    value (or environment variable) is one line naming it, not argparse's usage."""
    group.add_argument(
        "--log-level",
        metavar="LEVEL",
        help=f"the least severe report shown: {', '.join(LEVELS)}"
        f" (default: {LEVEL_ENV}, else info)",
    )
    group.add_argument(
        "--log-format",
        metavar="FORMAT",
        help="text (lines as a person reads them) or json (one object per line: time,"
        f" level, logger, message, job_id, stimulus_id) (default: {FORMAT_ENV}, else text)",
    )


def configure_from(args: argparse.Namespace, stream: str = "stdout") -> None:
    """Set up logging from ``args.log_level`` and ``args.log_format`` (or their
    environment variables); both are left in ``args`` as chosen. A value that is not
    one of the choices raises ``ValueError`` naming the option or variable."""
    args.log_level = _choice(args.log_level, LEVEL_ENV, "--log-level", tuple(LEVELS), "info")
    args.log_format = _choice(args.log_format, FORMAT_ENV, "--log-format", FORMATS, "text")
    configure_logging(args.log_level, args.log_format, stream)


def configure_logging(level: str, form: str, stream: str = "stdout") -> None:
    """One handler on the root logger writing ``form`` lines to ``sys.<stream>`` (looked
    up at each line, so a replaced stream is followed); ilucid's loggers at ``level``,
    everyone else's at warning or above; Python's warnings go through it too."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER]:
        root.removeHandler(old)
    handler = _Console(stream)
    handler.set_name(_HANDLER)
    handler.setFormatter(JsonFormatter() if form == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(max(logging.WARNING, LEVELS[level]))
    logging.getLogger("ilucid").setLevel(LEVELS[level])
    logging.captureWarnings(True)


def _choice(
    given: str | None, env: str, option: str, allowed: tuple[str, ...], default: str
) -> str:
    if given is not None:
        where, value = option, given
    elif os.environ.get(env):
        where, value = env, os.environ[env]
    else:
        return default
    chosen = value.strip().lower()
    if chosen not in allowed:
        raise ValueError(f"{where} {value!r}: give one of {', '.join(allowed)}")
    return chosen


class _Console(logging.StreamHandler[TextIO]):
    """A stream handler on ``sys.stdout`` or ``sys.stderr`` as they are when a line is
    written (as :data:`logging.lastResort` does), not as they were at setup."""

    def __init__(self, name: str) -> None:
        logging.Handler.__init__(self)  # StreamHandler's would store a stream
        self._stream_name = name

    @property
    def stream(self) -> TextIO:  # type: ignore[override]
        stream: TextIO = getattr(sys, self._stream_name)
        return stream


class TextFormatter(logging.Formatter):
    """The message as the service has always printed it; warnings and errors lead with
    their level (``warning: ...``); a traceback follows when one was logged."""

    def format(self, record: logging.LogRecord) -> str:
        message = printable(record.getMessage().rstrip())
        if record.levelno >= logging.WARNING:
            message = f"{record.levelname.lower()}: {message}"
        if record.exc_info:
            message = f"{message}\n{self.formatException(record.exc_info)}"
        if record.stack_info:
            message = f"{message}\n{self.formatStack(record.stack_info)}"
        return message


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (see the module's docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        time = datetime.fromtimestamp(record.created, UTC)
        entry: dict[str, str] = {
            "time": time.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for field in CONTEXT_FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                entry[field] = str(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry)

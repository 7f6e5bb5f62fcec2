"""Every ``ilucid`` option says what it does and what it defaults to (issue 19), and
``serve --help``'s GPU default is the one the README and the Makefile promise."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ilucid.cli.app import build_parser

ROOT = Path(__file__).resolve().parents[2]


def _parsers(
    parser: argparse.ArgumentParser, name: str = "ilucid"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Each parser under ``parser`` (model's verbs too), with its command line."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def _options() -> Iterator[tuple[str, argparse.Action, argparse.ArgumentParser]]:
    for name, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            if isinstance(action, argparse._SubParsersAction):
                continue
            yield name, action, parser


def _help_of(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The option's entry in ``--help`` (its line and the lines continuing it), on one line."""
    text = parser.format_help()
    start = re.search(rf"\n  {re.escape(action.option_strings[0])}[ ,\n]", text)
    assert start is not None, (action.option_strings, text)
    entry = re.split(r"\n  -|\n\n", text[start.end() :], maxsplit=1)[0]
    return " ".join(entry.split())


def test_every_option_and_argument_has_help() -> None:
    missing = [
        f"{name} {'/'.join(action.option_strings) or action.dest}"
        for name, action, _ in _options()
        if not (action.help or "").strip() or action.help == argparse.SUPPRESS
    ]
    assert not missing, f"no help text: {missing}"


def test_every_option_shows_its_default() -> None:
    """An option with a default shows it in --help; one without says what happens
    instead (``default: ...``), is required, or is a flag that is off."""
    silent = []
    for name, action, parser in _options():
        if not action.option_strings or action.required:
            continue
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreConstAction)):
            continue
        if "default:" not in _help_of(parser, action):
            silent.append(f"{name} {action.option_strings[-1]}")
    assert not silent, f"no default in --help: {silent}"


def test_a_default_in_the_help_is_the_value_parsed() -> None:
    parser = build_parser()
    args = parser.parse_args(["serve"])
    serve = dict(_parsers(parser))["ilucid serve"]
    by_dest = {a.dest: a for a in serve._actions}
    assert _help_of(serve, by_dest["port"]).endswith(f"(default: {args.port})")
    assert args.port == 8787
    assert (
        _help_of(serve, by_dest["interval"])
        == f"INTERVAL reconcile every N s (default: {args.interval})"
    )


def test_serve_gpus_default_matches_the_readme_and_the_makefile() -> None:
    from ilucid.cli.serve.options import DEFAULT_VIRTUAL_GPUS

    serve = dict(_parsers(build_parser()))["ilucid serve"]
    text = " ".join(serve.format_help().split())
    said = re.search(r"--gpus GPUS .*?else (\d+) virtual", text)
    assert said is not None, text
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    promised = re.search(r"on a machine without them, (\d+) virtual GPUs", readme)
    makefile = re.search(r"^GPUS \?= (\d+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert promised is not None and makefile is not None
    assert int(said.group(1)) == int(promised.group(1)) == int(makefile.group(1))
    assert int(said.group(1)) == DEFAULT_VIRTUAL_GPUS


@pytest.mark.parametrize("command", ["submit", "serve", "whatif", "simulate"])
def test_help_runs(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([command, "--help"])
    assert done.value.code == 0
    assert "default:" in capsys.readouterr().out


def test_every_help_page_formats() -> None:
    """``ilucid --help`` and each command's help render (a bare % in a help string once
    made ``ilucid --help`` itself crash)."""
    root = build_parser()
    assert "sweep" in root.format_help()
    for name, parser in _parsers(root):
        assert parser.format_help(), name

"""A command's parser keeps every argument added to it, through groups and nested groups too.

argparse's own list of a parser's actions (private, read here only) is the
oracle: for every command of fpm and of the shipped plugins, and every
subcommand parser under it, :attr:`CommandParser.added_actions` holds the
same actions in the same order.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from fpmcore.host.command_parser import CommandParser
from fpmcore.testing import make_host

ALL = ("vllm_027", "vllm_032", "vllm_033", "glm53flash", "dsv41")


def _commands() -> list[tuple[str, object]]:
    host = make_host(entry_points=ALL)
    return [(command.name, command) for _plugin, command in host.hooks.cli_commands()]


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every subcommand parser under it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


@pytest.mark.parametrize(("name", "command"), _commands(), ids=[n for n, _c in _commands()])
def test_every_argument_of_a_command_is_kept(name, command):
    parser = CommandParser(prog=f"fpm {name}")
    command.configure(parser)
    for p in _parsers(parser):
        assert isinstance(p, CommandParser)
        assert p.added_actions == p._actions, p.prog
        assert p.option_strings() == list(p._option_string_actions), p.prog


def test_groups_within_groups_are_kept():
    parser = CommandParser(prog="fpm x")
    group = parser.add_argument_group("a group")
    group.add_argument("--a", help="a")
    exclusive = group.add_mutually_exclusive_group()
    exclusive.add_argument("--b", help="b")
    exclusive.add_argument("--c", help="c")
    either = parser.add_mutually_exclusive_group(required=True)
    either.add_argument("--d", action="store_true", help="d")
    parser.add_argument("e", help="e")
    assert [a.dest for a in parser.added_actions] == ["help", "a", "b", "c", "d", "e"]
    assert parser.added_actions == parser._actions
    assert parser.option_strings() == ["-h", "--help", "--a", "--b", "--c", "--d"]
    assert parser.parse_args(["--b", "1", "--d", "x"]).b == "1"


@pytest.mark.parametrize(
    ("columns", "expected"),
    [("93", 93), ("0", None), ("wide", None), (None, None)],
    ids=["set", "zero", "junk", "unset"],
)
def test_the_help_width_is_the_one_shutil_finds(monkeypatch, columns, expected):
    """``COLUMNS`` when it is a positive number, else the terminal's (here none: stdout is captured), else 80."""
    import shutil

    from fpmcore.host.command_parser import terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns == (expected or shutil.get_terminal_size().columns)
    if expected is None:
        assert terminal_columns() == 80


def test_a_command_parser_wraps_its_help_at_that_width(monkeypatch):
    def longest_line(columns: str) -> int:
        monkeypatch.setenv("COLUMNS", columns)
        parser = CommandParser(prog="fpm x")
        parser.add_argument("--trace", help="a trace file in any format the replay reads, arrival times in seconds")
        return max(len(line) for line in parser.format_help().splitlines())

    assert longest_line("40") <= 38  # argparse's width: the columns less 2
    assert longest_line("200") > 80  # the help sentence on one line

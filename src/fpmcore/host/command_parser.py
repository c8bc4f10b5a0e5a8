"""The parser a command's ``configure(parser)`` fills (:class:`~fpmcore.host.hooktypes.CliCommand`).

argparse keeps a parser's arguments in private attributes only; a
:class:`CommandParser` also keeps every :class:`argparse.Action` that
``add_argument`` returns, on the parser itself or on one of its argument
groups or mutually exclusive groups (nested ones too), and the action of
``add_subparsers``, so that what the
command line and the conformance suite read of a command's options needs
nothing of argparse but its public methods.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def terminal_columns() -> int:
    """The terminal's width as :func:`shutil.get_terminal_size` finds it: ``COLUMNS``, else stdout's terminal, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help formatter, its width found without importing :mod:`shutil`.

    argparse makes a formatter in every ``add_argument`` call (to check the
    metavar), and the stock one imports :mod:`shutil` for its width, which
    imports bz2, lzma and zlib: 6 ms of every ``fpm`` command's start, for a
    width nothing but help text uses.  The width is the same
    (:func:`terminal_columns`, less 2).
    """

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, terminal_columns() - 2 if width is None else width)


class CommandParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose :attr:`added_actions` are the arguments added to it.

    ``-h``/``--help`` is the first.  Arguments taken from ``parents=`` are
    not among them (no command's parser has parents).  A subcommand parser
    that ``add_subparsers`` makes here is of the same class and keeps its own.
    Its help is formatted by :class:`HelpFormatter` unless ``formatter_class``
    says otherwise.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: Every argument added, in the order added.
        self.added_actions: list[argparse.Action] = []
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.added_actions.append(action)
        return action

    def add_subparsers(self, **kwargs: Any) -> Any:
        action = super().add_subparsers(**kwargs)
        self.added_actions.append(action)
        return action

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        return self._keeping(super().add_argument_group(*args, **kwargs))

    def add_mutually_exclusive_group(self, **kwargs: Any) -> Any:
        return self._keeping(super().add_mutually_exclusive_group(**kwargs))

    def option_strings(self) -> list[str]:
        """The option strings of every argument added (``--trace``, ``-h``, …), in the order added."""
        return [option for action in self.added_actions for option in action.option_strings]

    def _keeping(self, group: Any) -> Any:
        """``group``, whose arguments and whose own groups' arguments are kept in :attr:`added_actions` too.

        argparse's group classes are private, so the group's three public
        methods are wrapped on the instance rather than subclassed.
        """
        add, add_group, add_exclusive = group.add_argument, group.add_argument_group, group.add_mutually_exclusive_group

        def add_argument(*args: Any, **kwargs: Any) -> argparse.Action:
            action: argparse.Action = add(*args, **kwargs)
            self.added_actions.append(action)
            return action

        group.add_argument = add_argument
        group.add_argument_group = lambda *args, **kwargs: self._keeping(add_group(*args, **kwargs))
        group.add_mutually_exclusive_group = lambda **kwargs: self._keeping(add_exclusive(**kwargs))
        return group

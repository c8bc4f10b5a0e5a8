"""The command line: ``fpm`` (:mod:`fpmcore.cli.command_line`: the parser, the error documents, the exit
codes), fpmcore's own commands, registered as a built-in plugin (:mod:`fpmcore.cli.commands`), a command's
:class:`~fpmcore.cli.context.Context`, ``fpm explain`` and the option types.

:func:`main` is the ``fpm`` entry point.  This package imports nothing when it is imported: the host
registers :mod:`fpmcore.cli.commands` and every command imports :mod:`fpmcore.cli.context` without
loading the parser, which itself builds the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fpmcore.host.plugins import PluginHost


def main(argv: Sequence[str] | None = None, *, host: PluginHost | None = None) -> int:
    """Run ``fpm`` with ``argv`` (``sys.argv[1:]`` when ``None``) and return its exit code
    (:func:`fpmcore.cli.command_line.main`)."""
    from fpmcore.cli.command_line import main as run_command_line

    return run_command_line(argv, host=host)


def run() -> None:
    """Console-script entry point: ``fpm``, exiting with its code."""
    from fpmcore.cli.command_line import run as run_and_exit

    run_and_exit()

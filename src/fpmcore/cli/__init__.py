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
    (:func:`fpmcore.cli.command_line.main`).

    Run as the process's own command line (``argv`` ``None``: the ``fpm``
    script, ``python -m fpmcore``), the garbage collector is paused while
    the command line starts — its imports, plugins and parser make tens of
    thousands of objects and no garbage, which the collector would scan over
    and over: about a fifteenth of a one-request ``fpm replay`` — and is on
    again, with start-up's objects frozen out of its collections
    (:func:`gc.freeze`), when the command runs.  An in-process call with an
    ``argv`` (tests, scripts) leaves the collector alone.
    """
    import gc

    from fpmcore.cli.command_line import main as run_command_line

    paused = argv is None and gc.isenabled()
    if paused:
        gc.disable()
    try:
        return run_command_line(argv, host=host, start_up_paused=paused)
    finally:
        if paused:
            gc.enable()  # an early exit (usage, --help) or an error before the command ran


def run() -> None:
    """``python -m fpmcore``: :func:`main` on the process's command line, exiting with its code."""
    import sys

    sys.exit(main())

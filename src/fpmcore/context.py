"""What a subcommand gets: the :class:`Context` of one ``fpm`` run, and the exit codes.

Every subcommand (fpmcore's own and a plugin's, ``fpm_cli_commands``) is
``run(args, ctx)`` and returns one of the exit codes below.  This module
imports neither the plugin host nor the command line, so that a command
module can use it without importing either.
"""

from __future__ import annotations

import sys
from typing import Any

#: 0 ok; 1 the operation's verdict is negative; 2 bad usage or unreadable input.
EXIT_OK, EXIT_NEGATIVE, EXIT_USAGE = 0, 1, 2


def _width(stream: Any) -> int | None:
    """Terminals keep their width; files and pipes get 160 columns, so tables stay readable."""
    try:
        return None if stream.isatty() else 160
    except (AttributeError, ValueError):
        return 160


class Context:
    """What a subcommand's ``run(args, ctx)`` gets.

    ``host``: the :class:`~fpmcore.plugins.PluginHost`; ``out``/``err``: rich
    consoles on stdout/stderr (created on first use); ``json``: ``--json``
    was given; ``debug``: ``--debug`` was given.
    """

    def __init__(self, host: Any, *, json: bool, debug: bool) -> None:
        self.host = host
        self.json = json
        self.debug = debug
        self._out: Any = None
        self._err: Any = None

    @property
    def out(self) -> Any:
        if self._out is None:
            from rich.console import Console

            self._out = Console(file=sys.stdout, width=_width(sys.stdout))
        return self._out

    @property
    def err(self) -> Any:
        if self._err is None:
            from rich.console import Console

            self._err = Console(file=sys.stderr, width=_width(sys.stderr))
        return self._err

    def emit_json(self, document: dict[str, Any]) -> None:
        """Write one JSON document to stdout (``"schema": 1`` first)."""
        from fpmcore.jsonio import dumps_output

        sys.stdout.write(dumps_output({"schema": 1, **document}).decode("utf-8"))
        sys.stdout.flush()

    def progress(self, description: str, total: int | None) -> Any:
        """A rich progress bar on stderr, disabled when stderr is not a terminal."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        return Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
            console=self.err, disable=not sys.stderr.isatty(), transient=True,
        )  # fmt: skip

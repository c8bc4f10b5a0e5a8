"""The ``fpm`` command line (``python -m fpmcore`` too).

Global options come before the subcommand::

    fpm [--version] [--debug] [--plugin ID]... [--disable-plugin ID]... COMMAND ...

Subcommands are contributed through the ``fpm_cli_commands`` hook; fpmcore's
own come from the built-in plugin :mod:`fpmcore.commands`.

Exit codes: 0 ok; 1 the operation's verdict is negative (an invalid
profile, an incomplete import, a refused artifact); 2 bad usage or
unreadable input.  With ``--json`` stdout holds exactly one JSON document
(``{"schema": 1, ...}``); messages and progress go to stderr.  A refusal is
printed as one diagnostic line; a traceback is shown only with ``--debug``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import fpmcore
from fpmcore.errors import FpmError

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
        self._out = self._err = None

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


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 through an exception, so tests can run ``main`` in-process."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise _UsageError(f"{self.prog}: error: {message}")


class _UsageError(Exception):
    pass


def _global_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fpm", add_help=False)
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("--plugin", action="append", default=[], metavar="ID", help="load plugin ID even with autoload off")
    p.add_argument("--disable-plugin", action="append", default=[], metavar="ID", help="do not load plugin ID")
    return p


def build_parser(host: Any) -> argparse.ArgumentParser:
    """The full parser: global options plus every registered subcommand."""
    parser = _Parser(
        prog="fpm",
        parents=[_global_parser()],
        description="fpmcore: import vLLM runtime observations into FPM profiles, plan, validate and replay.",
        epilog="Exit codes: 0 ok, 1 negative verdict, 2 bad usage or unreadable input.",
    )
    parser.add_argument("--version", action="version", version=f"fpm {fpmcore.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    seen: set[str] = set()
    for _plugin, command in host.hooks.cli_commands():
        if command.name in seen:
            continue  # the first registration wins (fpm_cli_commands)
        seen.add(command.name)
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        command.configure(p)
        p.set_defaults(_run=command.run)
    return parser


def main(argv: Sequence[str] | None = None, *, host: Any = None) -> int:
    """Run ``fpm`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    ``host`` replaces the plugin host built from the environment (tests).
    """
    from fpmcore.plugins import PluginHost

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        early, _ = _global_parser().parse_known_args(argv)
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    if host is None:  # FPM_STRICT_PLUGINS=1 raises from here, with the plugin's traceback
        host = PluginHost(enable=early.plugin, disable=early.disable_plugin)
    try:
        args = build_parser(host).parse_args(argv)
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help, --version
        return int(exc.code or 0)
    if getattr(args, "_run", None) is None:
        build_parser(host).print_help(sys.stderr)
        return EXIT_USAGE
    ctx = Context(host, json=bool(getattr(args, "json", False)), debug=args.debug)
    try:
        return int(args._run(args, ctx))
    except FpmError as exc:
        if args.debug:
            raise
        print(f"fpm: {exc} [{exc.rule}]", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("fpm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:
        if args.debug:
            raise
        print(f"fpm: internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)", file=sys.stderr)
        return EXIT_USAGE


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())

"""The ``fpm`` command line (``python -m fpmcore`` too).

Global options come before the subcommand::

    fpm [--version] [--debug] [--plugin ID]... [--disable-plugin ID]... COMMAND ...

Subcommands are contributed through the ``fpm_cli_commands`` hook.  The
command line builds the plugin host (:func:`build_host`) and registers
fpmcore's own commands in it as the built-in plugin :mod:`fpmcore.commands`,
the way any plugin's commands come in: the host itself knows no command.

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
from fpmcore import commands
from fpmcore.context import EXIT_OK, EXIT_USAGE, Context
from fpmcore.errors import FpmError
from fpmcore.plugins import PluginHost

#: The built-in plugins the command line registers before any other plugin.
BUILTIN_PLUGINS: tuple[object, ...] = (commands,)


def build_host(**kwargs: Any) -> PluginHost:
    """The plugin host of ``fpm``: the built-in commands plugin, then the plugins ``kwargs`` select.

    ``kwargs`` are those of :class:`~fpmcore.plugins.PluginHost` (``plugins``,
    ``autoload``, ``enable``, ``disable``, ``strict``, ``environ``).
    """
    return PluginHost(builtins=BUILTIN_PLUGINS, **kwargs)


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


def build_parser(host: PluginHost) -> argparse.ArgumentParser:
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


def main(argv: Sequence[str] | None = None, *, host: PluginHost | None = None) -> int:
    """Run ``fpm`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    ``host`` replaces the plugin host built from the environment (tests).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        early, _ = _global_parser().parse_known_args(argv)
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    if host is None:  # FPM_STRICT_PLUGINS=1 raises from here, with the plugin's traceback
        host = build_host(enable=early.plugin, disable=early.disable_plugin)
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
        from fpmcore.jsonio import one_line  # a value from the input never breaks the line

        print(one_line(f"fpm: {exc} [{exc.rule}]"), file=sys.stderr)
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

"""The ``fpm`` command line (``python -m fpmcore`` too).

Global options come before the subcommand::

    fpm [--version] [--debug] [--plugin ID]... [--disable-plugin ID]... COMMAND ...

Subcommands are contributed through the ``fpm_cli_commands`` hook.  The
command line runs in the plugin host of :func:`fpmcore.host.build.build_host`,
which registers fpmcore's own commands as the built-in plugin
:mod:`fpmcore.cli.commands`, the way any plugin's commands come in: plugin
loading itself knows no command.

Exit codes: 0 ok; 1 the operation's verdict is negative (an invalid
profile, an incomplete import, a refused artifact); 2 bad usage or
unreadable input.  With ``--json`` stdout holds exactly one JSON document
(``{"schema": 1, ...}``); messages and progress go to stderr.  A refusal is
printed as one diagnostic line; a traceback is shown only with ``--debug``.
"""

from __future__ import annotations

import argparse
import errno
import gc
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import fpmcore
from fpmcore.cli.context import EXIT_OK, EXIT_USAGE, Context, emit_json
from fpmcore.cli.options import integer, number
from fpmcore.documents.errors import FpmError
from fpmcore.host.build import build_host
from fpmcore.host.command_parser import CommandParser
from fpmcore.host.hooktypes import CliCommand, CommandContext
from fpmcore.host.plugins import PluginHost


class _Parser(CommandParser):
    """argparse that exits 2 through an exception, so tests can run ``main`` in-process.

    ``type=int`` and ``type=float`` of any option (fpmcore's or a plugin's)
    read through :func:`fpmcore.cli.options.integer` and
    :func:`fpmcore.cli.options.number`: bounded, finite, named in the error.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("type", int, integer())
        self.register("type", float, number())

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"fpm: error: {message}", self.format_usage())


class _SubParser(_Parser):
    """A subcommand's parser: an argument it does not know is its own error, shown with its own usage.

    Everything after a subcommand's name belongs to the subcommand, so an
    argument left over is never the top-level parser's.
    """

    def parse_known_args(  # type: ignore[override]  # one signature for the overloads
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(args) if args is not None else sys.argv[1:]
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def error(self, message: str) -> None:  # type: ignore[override]
        """An option this subcommand does not know is named first, with the closest it knows (``--tarce``:
        did you mean ``--trace``?), even where argparse would first miss a required one it stands for."""
        import difflib

        known = [o for o in self.option_strings() if o.startswith("--")]
        given = [a.split("=", 1)[0] for a in getattr(self, "_given", []) if a.startswith("--") and a != "--"]
        # neither an option of this subcommand nor the start of one (argparse takes unambiguous abbreviations)
        unknown = [a for a in given if not any(o.startswith(a) for o in known)]
        if unknown and not message.startswith("unrecognized arguments"):
            message = f"unrecognized arguments: {' '.join(unknown)}"
        if message.startswith("unrecognized arguments") and unknown:
            close = difflib.get_close_matches(unknown[0][2:], [o[2:] for o in known], n=1, cutoff=0.75)
            if close:
                message += f" (did you mean --{close[0]}?)"
        super().error(message)


class _UsageError(Exception):
    def __init__(self, message: str, usage: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage


def _global_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fpm", add_help=False)
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("--plugin", action="append", default=[], metavar="ID", help="load plugin ID even with autoload off")
    p.add_argument("--disable-plugin", action="append", default=[], metavar="ID", help="do not load plugin ID")
    return p


def build_parser(host: PluginHost, only: str | None = None) -> argparse.ArgumentParser:
    """The parser: global options plus every registered subcommand.

    With ``only`` the name of a registered subcommand (the one the command
    line names), that subcommand is the only one added, configured: the
    parser of a command that is never parsed costs as much to make as a
    small command's whole work (argparse makes each one's formatter and
    groups).  Any other ``only`` (``""``: a command line that names no
    subcommand, or a name that is none) lists every subcommand with its
    help and configures none, which is all ``fpm --help`` and argparse's
    choice check need (their parsers, never parsed, have no ``-h`` either),
    so that ``fpm --help`` imports no pipeline.  ``only=None`` configures
    every subcommand.
    """
    parser = _Parser(
        prog="fpm",
        parents=[_global_parser()],
        description="fpmcore: import vLLM runtime observations into FPM profiles, plan, validate and replay.",
        epilog="Exit codes: 0 ok, 1 negative verdict, 2 bad usage or unreadable input.",
    )
    parser.add_argument("--version", action="version", version=f"fpm {fpmcore.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_SubParser)
    commands: dict[str, CliCommand] = {}
    for _plugin, command in host.hooks.cli_commands():
        commands.setdefault(command.name, command)  # the first registration wins (fpm_cli_commands)
    if only and only in commands:
        commands = {only: commands[only]}
    for command in commands.values():
        configured = only is None or command.name == only
        # a subcommand listed only is never parsed: no -h of its own (argparse makes a help formatter for it)
        p = sub.add_parser(command.name, help=command.help, description=command.help, add_help=configured)
        if configured:
            command.configure(p)
        p.set_defaults(_run=command.run)
    return parser


def _error_document(ctx: Context | None, json_wanted: bool, rule: str, message: str, where: str = "") -> None:
    """``--json``: the one JSON document of a run that ends in an error (exit 2), unless one was printed already."""
    if not json_wanted or (ctx is not None and ctx.emitted_json):
        return
    document: dict[str, Any] = {"status": "error", "diagnostics": [{"rule": rule, "message": message, "where": where}]}
    if ctx is None:
        emit_json(document)
    else:
        ctx.emit_json(document)


#: Errors of a write that the output's device gives (no space, quota, file size, I/O).
_WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)


def _internal_error(ctx: Context, exc: BaseException) -> int:
    message = _one_line(f"internal error: {type(exc).__name__}: {exc}")
    print(f"fpm: {message} (run with --debug for the traceback)", file=sys.stderr)
    _error_document(ctx, ctx.json, "internal", message)
    return EXIT_USAGE


def _one_line(text: str) -> str:
    """:func:`fpmcore.documents.jsonio.one_line`: a value from the input never breaks a message's line.

    Imported when a message is printed, so that a command that prints none (``fpm --help``) does not
    import the JSON module and orjson.
    """
    from fpmcore.documents.jsonio import one_line

    return one_line(text)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush does not fail a second time."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):  # not a file (tests capture stdout in memory)
        pass


def main(argv: Sequence[str] | None = None, *, host: PluginHost | None = None, start_up_paused: bool = False) -> int:
    """Run ``fpm`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    ``host`` replaces the plugin host built from the environment (tests).
    ``start_up_paused``: the caller paused the garbage collector for the
    start-up (:func:`fpmcore.cli.main`); it is turned on again, and
    everything start-up made frozen out of its collections
    (:func:`gc.freeze`), just before the command runs.
    Every error ends here: one diagnostic line on stderr and, with
    ``--json``, one document ``{"schema": 1, "status": "error",
    "diagnostics": [...]}`` on stdout (unless the command printed its own).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    json_wanted = "--json" in argv
    try:
        early, rest = _global_parser().parse_known_args(argv)
    except _UsageError as exc:
        sys.stderr.write(exc.usage)
        print(exc.message, file=sys.stderr)
        _error_document(None, json_wanted, "usage", exc.message)
        return EXIT_USAGE
    if host is None:  # FPM_STRICT_PLUGINS=1 raises from here, with the plugin's traceback
        host = build_host(enable=early.plugin, disable=early.disable_plugin)
    for warning in host.selection_warnings():
        print(_one_line(f"fpm: warning: {warning}"), file=sys.stderr)
    try:
        named = next((a for a in rest if not a.startswith("-")), None)
        args = build_parser(host, only=named or "").parse_args(argv)
    except _UsageError as exc:
        sys.stderr.write(exc.usage)
        print(exc.message, file=sys.stderr)
        _error_document(None, json_wanted, "usage", exc.message)
        return EXIT_USAGE
    except SystemExit as exc:  # --help, --version
        return int(exc.code or 0)
    if getattr(args, "_run", None) is None:
        build_parser(host, only="").print_help(sys.stderr)
        _error_document(None, json_wanted, "usage", "fpm: error: no command given")
        return EXIT_USAGE
    ctx = Context(host, json=bool(getattr(args, "json", False)), debug=args.debug)
    run_command: Callable[[argparse.Namespace, CommandContext], int] = args._run  # CliCommand.run
    if start_up_paused:  # start-up is over: what it made is kept out of collections
        gc.freeze()
        gc.enable()
    try:
        code = int(run_command(args, ctx))
        sys.stdout.flush()  # a full device fails here, not in the interpreter's last flush
        return code
    except FpmError as exc:
        if args.debug:
            raise
        print(_one_line(f"fpm: {exc} [{exc.rule}]"), file=sys.stderr)
        _error_document(ctx, ctx.json, exc.rule, _one_line(exc.message), _one_line(exc.where))
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("fpm: interrupted", file=sys.stderr)
        _error_document(ctx, ctx.json, "interrupted", "interrupted")
        return 130
    except BrokenPipeError:  # the reader stopped reading (`| head`): not a verdict, nothing to say
        _silence_stdout()
        return EXIT_OK
    except OSError as exc:
        if args.debug:
            raise
        if exc.filename is not None or exc.errno not in _WRITE_ERRORS:
            return _internal_error(ctx, exc)
        # stdout cannot take the output (/dev/full, a full disk): O-5, and no second error at exit
        print(_one_line(f"fpm: stdout: cannot write the output: {exc.strerror} [O-5]"), file=sys.stderr)
        _silence_stdout()
        return EXIT_USAGE
    except Exception as exc:
        if args.debug:
            raise
        return _internal_error(ctx, exc)

"""What a subcommand gets: the :class:`Context` of one ``fpm`` run, and the exit codes.

Every subcommand (fpmcore's own and a plugin's, ``fpm_cli_commands``) is
``run(args, ctx)`` and returns one of the exit codes below.  This module
imports neither the plugin host nor the command line, so that a command
module can use it without importing either.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table as RichTable

    from fpmcore.cli.tables import Table
    from fpmcore.host.hooktypes import ProgressBar
    from fpmcore.host.plugins import PluginHost

#: 0 ok; 1 the operation's verdict is negative; 2 bad usage or unreadable input.
EXIT_OK, EXIT_NEGATIVE, EXIT_USAGE = 0, 1, 2


#: The width of output that goes to a file or a pipe: wide enough that rich
#: never wraps a line; tables keep their natural width (they do not expand).
PIPE_WIDTH = 10_000


def _console(stream: Any) -> Console:
    """A rich console on ``stream``.

    A terminal keeps its width (``COLUMNS`` or the terminal's), and rich
    wraps text between words there.  A file or a pipe never gets a value
    wrapped or truncated: rich does not wrap (``soft_wrap``) and tables
    take their natural width, so a line a program reads stays one line.
    Emoji codes are off: a ``:name:`` in a path or a model name is printed as
    it is (and rich's emoji table is never loaded).
    """
    from rich.console import Console

    tty = _isatty(stream)
    if tty:
        console = Console(file=stream, emoji=False)
    else:
        console = Console(file=stream, width=PIPE_WIDTH, soft_wrap=True, color_system=None, emoji=False)
    console.on_broken_pipe = _raise_broken_pipe  # type: ignore[method-assign]
    return console


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _raise_broken_pipe() -> None:
    """A reader that closed the pipe (``fpm plan … | head -2``) is no negative verdict: rich's own handling
    exits 1, this raises :class:`BrokenPipeError` for ``fpm``'s entry point, which ends quietly with exit 0."""
    raise BrokenPipeError(32, "Broken pipe")


def print_table(console: Any, table: Any) -> None:
    """Print a table (:class:`fpmcore.cli.tables.Table` or rich's) that reads well at any width (80 columns
    and up) and never breaks a word.

    As it is when every column fits without cutting a word; else with
    compact borders (a rule under the header, one space between columns);
    else one block per row, ``header: value`` per line.  Piped, a table
    keeps its natural width (:data:`PIPE_WIDTH`).
    """
    from rich import box

    from fpmcore.cli.tables import Table

    if isinstance(table, Table):
        table = table.to_rich()
    if _min_width(console, table) > console.width:
        table.box, table.show_edge, table.pad_edge, table.padding = box.SIMPLE_HEAD, False, False, (0, 0)
    if _min_width(console, table) <= console.width:
        console.print(table)
        return
    _print_rows(console, table)


def _min_width(console: Any, table: Any) -> int:
    """The narrowest width at which ``table`` cuts no word (rich wraps cells between words)."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update(max_width=PIPE_WIDTH), table).minimum


def _print_rows(console: Any, table: Any) -> None:
    """A table too wide for the terminal as one block per row: the first cell, then ``header: value`` lines."""
    if table.title:
        console.print(table.title)
    columns = table.columns
    by_column = [list(c.cells) for c in columns]
    for i in range(table.row_count):
        cells = [column_cells[i] for column_cells in by_column]
        console.print(cells[0])
        for column, cell in zip(columns[1:], cells[1:], strict=True):
            console.print("  ", column.header, ": ", cell, sep="", highlight=False)


class Context:
    """What a subcommand's ``run(args, ctx)`` gets: a :class:`fpmcore.host.hooktypes.CommandContext`.

    ``host``: the :class:`~fpmcore.host.plugins.PluginHost`; ``out``/``err``: rich
    consoles on stdout/stderr (created on first use); ``json``: ``--json``
    was given; ``debug``: ``--debug`` was given.
    """

    def __init__(self, host: PluginHost, *, json: bool, debug: bool) -> None:
        self.host = host
        self.json = json
        self.debug = debug
        self._out: Console | None = None
        self._err: Console | None = None
        #: A JSON document was printed (``--json`` prints exactly one).
        self.emitted_json = False

    @property
    def out(self) -> Console:
        if self._out is None:
            self._out = _console(sys.stdout)
        return self._out

    @property
    def err(self) -> Console:
        if self._err is None:
            self._err = _console(sys.stderr)
        return self._err

    def message(self, text: str) -> None:
        """One line of plain text on stderr (a note, a diagnostic, what was written).

        Written as it is when stderr is no terminal, without rich (whose
        import is a tenth of a short command's time, and which would read
        ``:b:`` in a path as an emoji); on a terminal through :attr:`err`,
        which the terminal wraps.  Never markup, never highlighting.
        """
        if not _isatty(sys.stderr):
            sys.stderr.write(text + "\n")
            sys.stderr.flush()
            return
        self.err.print(text, markup=False, highlight=False, soft_wrap=True, emoji=False)

    def print_table(self, table: Table | RichTable) -> None:
        """:func:`print_table` on stdout.  Into a file or a pipe, before anything else of the command went
        through :attr:`out`, a :class:`~fpmcore.cli.tables.Table` is written without rich, as rich would
        print it there (:func:`~fpmcore.cli.tables.render_plain`)."""
        from fpmcore.cli.tables import Table, render_plain

        if isinstance(table, Table) and self._out is None and not _isatty(sys.stdout):
            text = render_plain(table, getattr(sys.stdout, "encoding", None))
            if text is not None:
                sys.stdout.write(text)
                sys.stdout.flush()
                return
        print_table(self.out, table)

    def emit_json(self, document: dict[str, Any]) -> None:
        """Write one JSON document to stdout (``"schema": 1`` first)."""
        self.emitted_json = True
        emit_json(document)

    def progress(self, unit: str | None = None, *, steps: bool = False, transient: bool = True) -> ProgressBar:
        """The command line's one progress bar, on stderr, off when stderr is not a terminal: the task's
        description, a bar, ``done/total`` and ``unit``, with ``steps`` the task's ``steps`` field, the elapsed
        time and the ETA.  At any terminal width the counts and times stay whole: the description is shortened
        with an ellipsis and the bar narrows first.  Off, it is a :class:`QuietProgress` (rich not imported)."""
        if not _isatty(sys.stderr):
            return QuietProgress()
        return progress_bar(self.err, unit, steps=steps, transient=transient)


def emit_json(document: dict[str, Any]) -> None:
    """:meth:`Context.emit_json` outside a command (the error document of a command line that names none)."""
    from fpmcore.documents.jsonio import dumps_output

    sys.stdout.write(dumps_output({"schema": 1, **document}).decode("utf-8"))
    sys.stdout.flush()


class QuietProgress:
    """The progress bar when stderr is no terminal: the calls the commands make on rich's ``Progress``
    (``with``, ``add_task``, ``update``, ``advance``), doing nothing."""

    def __enter__(self) -> QuietProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, **fields: Any) -> int:
        return 0

    def update(self, task: int, **fields: Any) -> None:
        return None

    def advance(self, task: int, advance: float = 1) -> None:
        return None


def progress_bar(console: Console, unit: str | None = None, *, steps: bool = False, transient: bool = True) -> Progress:
    """:meth:`Context.progress` on ``console``."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.table import Column

    def whole() -> Column:
        return Column(no_wrap=True)

    columns: list[Any] = [
        TextColumn("{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1, min_width=6)),
        BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=4)),
        MofNCompleteColumn(table_column=whole()),
    ]
    if unit:
        columns.append(TextColumn(unit, table_column=whole()))
    if steps:
        columns.append(TextColumn("· {task.fields[steps]:,} steps ·", table_column=whole()))
    columns += [TimeElapsedColumn(table_column=whole()), TextColumn("ETA", table_column=whole()),
                TimeRemainingColumn(table_column=whole())]  # fmt: skip
    return Progress(*columns, console=console, disable=not sys.stderr.isatty(), transient=transient, expand=True)

"""The tables ``fpm`` prints, built without rich and printed by rich only on a terminal.

A command builds a :class:`Table` (the subset of rich's ``Table`` the CLI
uses: a title, columns with a header, a justification, ``no_wrap`` and a
minimum width, rows of plain text with an optional style per cell) and
prints it with :meth:`fpmcore.cli.context.Context.print_table`:

* on a terminal, as a rich table (:meth:`Table.to_rich`): styles, the
  terminal's width, and the narrow-terminal fallbacks of
  :func:`fpmcore.cli.context.print_table`;
* into a file or a pipe, where rich prints a table at its natural width
  without colour, as the same characters made here (:func:`render_plain`),
  without importing rich: rich's import and its table layout are a fifth of
  a one-request ``fpm replay`` and a quarter of ``fpm plugins``.

:func:`render_plain` gives exactly what rich prints for the same table into a
pipe (``tests/test_cli_tables.py`` compares the two byte for byte on generated
tables), and gives ``None`` for what it does not lay out itself: text with a
character whose width in a terminal is not one column (wide East Asian
characters, combining marks, control characters and tabs) or with a line
break at its end, an output encoding other than UTF-8 (where rich draws its
boxes in ASCII), or a table with neither a header nor a row; such a table is
printed by rich.  Cell text is always literal: no rich markup is read in it,
on a terminal either.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Literal

Justify = Literal["left", "right"]
#: A cell: its text, or its text and a rich style name (``"green"``, ``"bold red"``) used on a terminal.
Cell = str | tuple[str, str]

#: rich's ``HEAVY_HEAD`` box (its default), and ``SQUARE``, which rich draws instead without a header row.
_HEAVY_HEAD = ("┏━┳┓", "┃┃┃", "┡━╇┩", "│││", "└─┴┘")
_SQUARE = ("┌─┬┐", "│││", "├─┼┤", "│││", "└─┴┘")


class Column:
    """A column: its header, how its cells are justified, whether rich may wrap them, its least text width."""

    __slots__ = ("header", "justify", "no_wrap", "min_width")

    def __init__(self, header: str, justify: Justify, no_wrap: bool, min_width: int | None) -> None:
        self.header = header
        self.justify = justify
        self.no_wrap = no_wrap
        self.min_width = min_width


class Table:
    """A table of text: ``Table(title=…)``, then :meth:`add_column` and :meth:`add_row` as with rich's.

    ``box=False`` draws no lines (the cells padded by one space each side, as
    rich's ``box=None``); ``show_header=False`` leaves the header row out.
    """

    def __init__(
        self,
        *headers: str,
        title: str | None = None,
        title_justify: Literal["left", "center"] = "center",
        show_header: bool = True,
        box: bool = True,
    ) -> None:
        self.title = title
        self.title_justify = title_justify
        self.show_header = show_header
        self.box = box
        self.columns: list[Column] = []
        self.rows: list[tuple[Cell, ...]] = []
        for header in headers:
            self.add_column(header)

    def add_column(
        self, header: str = "", *, justify: Justify = "left", no_wrap: bool = False, min_width: int | None = None
    ) -> None:
        self.columns.append(Column(header, justify, no_wrap, min_width))

    def add_row(self, *cells: Cell) -> None:
        """A row; a row with more cells than columns adds columns without a header, as rich does."""
        while len(self.columns) < len(cells):
            self.add_column()
        self.rows.append(cells)

    def to_rich(self) -> Any:
        """The same table as a rich ``Table`` (its text as rich ``Text``, never read as markup)."""
        from rich import box
        from rich.table import Table as RichTable
        from rich.text import Text

        table = RichTable(
            title=None if self.title is None else Text(self.title, style="table.title"),
            title_justify=self.title_justify,
            show_header=self.show_header,
            box=box.HEAVY_HEAD if self.box else None,
        )
        for c in self.columns:
            table.add_column(Text(c.header), justify=c.justify, no_wrap=c.no_wrap, min_width=c.min_width)
        for row in self.rows:
            table.add_row(*(Text(cell) if isinstance(cell, str) else Text(cell[0], style=cell[1]) for cell in row))
        return table


def _text(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell[0]


def _one_column_each(text: str) -> bool:
    """Every character of ``text`` takes one column of a terminal (and none is a line break but ``\\n``)."""
    if text.isascii():
        return all(" " <= ch <= "~" or ch == "\n" for ch in text)
    for ch in text:
        if ch == "\n":
            continue
        if unicodedata.east_asian_width(ch) in ("W", "F") or unicodedata.combining(ch):
            return False
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Mn", "Me", "Zl", "Zp"):
            return False
    return True


def render_plain(table: Table, encoding: str | None = "utf-8") -> str | None:
    """What rich prints for ``table`` into a pipe (natural width, no colour), or ``None`` (see the module).

    ``encoding``: the output stream's; ``None`` (a stream of text such as ``io.StringIO``) counts as UTF-8,
    as rich counts it."""
    if not (table.show_header or table.rows):  # no cell at all: rich spreads the columns over its whole width
        return None
    if table.box and not (encoding or "utf-8").lower().replace("-", "").startswith("utf"):
        return None
    texts = [c.header for c in table.columns] + [_text(cell) for row in table.rows for cell in row]
    if table.title is not None:
        texts.append(table.title)
    if not all(_one_column_each(t) and not t.endswith("\n") for t in texts):
        return None
    ncols = len(table.columns)
    # the rows as lists of lines per cell, the header first when shown; a missing cell is empty
    grid: list[list[list[str]]] = []
    if table.show_header:
        grid.append([c.header.split("\n") for c in table.columns])
    for row in table.rows:
        grid.append([_text(row[i]).split("\n") if i < len(row) else [""] for i in range(ncols)])
    widths = []  # text width of each column (its padding of one space each side not included)
    for i, column in enumerate(table.columns):
        w = max((len(line) for r in grid for line in r[i]), default=0)
        widths.append(max(w, column.min_width or 0))
    right = [c.justify == "right" for c in table.columns]
    if table.box:
        top, head, head_rule, body, bottom = _HEAVY_HEAD if table.show_header else _SQUARE
    out: list[str] = []
    if table.title:  # piped, rich neither wraps nor justifies the title (soft wrap)
        out.extend(table.title.split("\n"))

    def rule(chars: str) -> str:
        return chars[0] + chars[2].join(chars[1] * (w + 2) for w in widths) + chars[3]

    if table.box:
        out.append(rule(top))
    for r_index, cells in enumerate(grid):
        is_header = table.show_header and r_index == 0
        height = max(len(lines) for lines in cells)
        if is_header:  # rich aligns the header row's cells at the bottom, the others at the top
            cells = [[""] * (height - len(lines)) + lines for lines in cells]
        for k in range(height):
            parts = []
            for i, lines in enumerate(cells):
                line = lines[k] if k < len(lines) else ""
                if right[i]:  # rich strips a right-justified line's trailing spaces before it pads
                    line = line.rstrip()
                    parts.append(f" {line:>{widths[i]}} ")
                else:
                    parts.append(f" {line:<{widths[i]}} ")
            if table.box:
                edge = head if is_header else body
                out.append(edge[0] + edge[1].join(parts) + edge[2])
            else:
                out.append("".join(parts))
        if is_header and table.box:
            out.append(rule(head_rule))
    if table.box:
        out.append(rule(bottom))
    return "".join(line + "\n" for line in out)

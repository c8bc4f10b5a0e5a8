"""fpmcore.cli.tables: a table printed into a pipe without rich is what rich prints, byte for byte."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from fpmcore.cli.context import PIPE_WIDTH
from fpmcore.cli.tables import Table, render_plain


def rich_piped(table: Table) -> str:
    """What rich prints for ``table`` into a pipe: the console ``fpm`` makes for a file or a pipe."""
    buf = io.StringIO()
    Console(file=buf, width=PIPE_WIDTH, soft_wrap=True, color_system=None, emoji=False).print(table.to_rich())
    return buf.getvalue()


#: Text as commands print it (numbers, names, paths, dashes, brackets) and what rich lays out otherwise.
PLAIN = st.text(st.sampled_from(list("ab Z09.,:/_-[]()") + ["–", "−", "é", "×", "\n"]), max_size=14)
ODD = st.text(st.sampled_from(list("ab ") + ["漢", "\u0301", "\t", "\u200b", "\n"]), max_size=6)


@st.composite
def tables(draw: st.DrawFn, text: st.SearchStrategy[str] = PLAIN) -> Table:
    t = Table(
        title=draw(st.none() | text),
        title_justify=draw(st.sampled_from(["left", "center"])),
        show_header=draw(st.booleans()),
        box=draw(st.booleans()),
    )
    for _ in range(draw(st.integers(1, 4))):
        t.add_column(draw(text), justify=draw(st.sampled_from(["left", "right"])), no_wrap=draw(st.booleans()),
                     min_width=draw(st.none() | st.integers(0, 20)))  # fmt: skip
    for _ in range(draw(st.integers(0, 4))):
        n = draw(st.integers(0, len(t.columns) + 1))
        t.add_row(*(draw(text | st.tuples(text, st.sampled_from(["green", "bold red"]))) for _ in range(n)))
    return t


@settings(max_examples=400, deadline=None)
@given(tables())
def test_plain_rendering_is_what_rich_prints_into_a_pipe(table: Table) -> None:
    plain = render_plain(table)
    texts = (
        [table.title or ""]
        + [c.header for c in table.columns]
        + [cell if isinstance(cell, str) else cell[0] for row in table.rows for cell in row]
    )
    # rich spreads a table without a cell over its whole width; a text's line break at its end is left to rich
    if not (table.show_header or table.rows) or any(t.endswith("\n") for t in texts):
        assert plain is None
    else:
        assert plain == rich_piped(table)


@settings(max_examples=200, deadline=None)
@given(tables(ODD))
def test_text_of_other_widths_is_left_to_rich_or_rendered_the_same(table: Table) -> None:
    plain = render_plain(table)
    assert plain is None or plain == rich_piped(table)


def test_a_wide_character_or_a_tab_is_left_to_rich() -> None:
    for odd in ("漢字", "a\tb", "e\u0301"):
        t = Table("h")
        t.add_row(odd)
        assert render_plain(t) is None


def test_ascii_output_is_left_to_rich() -> None:
    t = Table("h")
    t.add_row("x")
    assert render_plain(t, encoding="ascii") is None
    assert render_plain(t, encoding="UTF-8") == rich_piped(t)
    lines = render_plain(t, encoding="utf8")
    assert lines == "┏━━━┓\n┃ h ┃\n┡━━━┩\n│ x │\n└───┘\n"


def test_markup_is_literal_text() -> None:
    t = Table("[bold]rule[/]")
    t.add_row("[G-3]", ("[red]x", "green"))
    assert render_plain(t) == rich_piped(t)
    assert "[bold]rule[/]" in rich_piped(t) and "[G-3]" in rich_piped(t)

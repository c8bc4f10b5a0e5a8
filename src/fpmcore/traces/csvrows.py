"""Reading the CSV traces (BurstGPT, Azure) row by row: the header, the fields, the numbers.

Each line is parsed on its own (:mod:`csv`, so quoted fields work), never the
whole file.  The header must name the format's columns (in any order; other
columns are ignored); a row with another number of fields than the header, a
count that is not a non-negative integer, or a number that is not finite is
refused naming its line (T-2).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator

from fpmcore.documents.errors import FpmError
from fpmcore.traces.format import MAX_TOKENS, SkippedRow, TraceSource, first_line


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A count's and a number's text, compiled when a CSV trace is first read (not by every replay)."""
    return re.compile(r"^[+-]?[0-9]{1,30}$"), re.compile(
        r"^[+-]?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})([eE][+-]?[0-9]{1,4})?$"
    )


def _fields(text: str) -> list[str]:
    """The stripped fields of one CSV line; ``ValueError`` (with :class:`csv.Error`'s text) if it is not one."""
    import csv  # here, not at the top: every replay imports this module, few read a CSV trace

    try:
        return [f.strip() for f in next(csv.reader([text]))]
    except csv.Error as exc:
        raise ValueError(str(exc)) from None


def header_matches(head: bytes, columns: tuple[str, ...]) -> bool:
    """The first line of ``head`` is a CSV header that names every one of ``columns``."""
    line = first_line(head)
    if line is None or not all(c in line for c in columns):  # the quick test first: most heads are not CSV
        return False
    try:
        names = set(_fields(line))
    except ValueError:
        return False
    return all(c in names for c in columns)


def rows(source: TraceSource, columns: tuple[str, ...], what: str) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line number, {column: field})`` of each data row of a CSV trace with ``columns`` (``what`` names it)."""
    where = source.where
    index: dict[str, int] | None = None
    width = 0
    for n, text in source.lines():
        if not text.strip():
            continue
        try:
            fields = _fields(text)
        except ValueError as exc:
            raise FpmError("T-2", f"line {n}: not a CSV row: {exc}", where) from None
        if index is None:
            missing = [c for c in columns if c not in fields]
            if missing:
                raise FpmError("T-2", f"line {n}: the header lacks the column{'s' if len(missing) > 1 else ''} "
                                      f"{', '.join(missing)} of {what} ({','.join(columns)})", where)  # fmt: skip
            index = {c: fields.index(c) for c in columns}
            width = len(fields)
            continue
        if len(fields) != width:
            raise FpmError("T-2", f"line {n}: {len(fields)} fields, the header has {width}", where)
        yield n, {c: fields[i] for c, i in index.items()}
    if index is None:
        raise FpmError("R-33", "trace is empty", where)


def count(text: str, column: str, line: int, where: str) -> int:
    """A token count: an integer in 0 … 2**40."""
    if not _patterns()[0].match(text):
        raise FpmError("T-2", f"line {line}: {column} must be an integer, found {_show(text)}", where)
    value = int(text)
    if not 0 <= value <= MAX_TOKENS:
        raise FpmError("T-2", f"line {line}: {column} must be in 0..2**40, found {_show(text)}", where)
    return value


def seconds(text: str, column: str, line: int, where: str) -> float:
    """A finite, non-negative number of seconds."""
    value = float(text) if _patterns()[1].match(text) else math.nan
    if not math.isfinite(value) or value < 0:
        raise FpmError("T-2", f"line {line}: {column} must be a finite number of seconds >= 0, found {_show(text)}",
                       where)  # fmt: skip
    return value


def zero_lengths(prompt: int, output: int, prompt_column: str, output_column: str) -> SkippedRow | None:
    """The skipped row of a request with no prompt or no output tokens (a failed request of the trace)."""
    if output == 0:
        return SkippedRow(f"{output_column} 0")
    if prompt == 0:
        return SkippedRow(f"{prompt_column} 0")
    return None


def _show(text: str) -> str:
    return repr(text) if len(text) <= 32 else repr(text[:29] + "…")

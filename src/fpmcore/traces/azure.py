"""The Azure LLM inference trace format (Azure/AzurePublicDataset, 2023 and 2024 releases).

CSV with a header; the columns, as the dataset's README defines them:

``TIMESTAMP``
    the request's arrival, a date and time (``2023-11-16 18:15:46.6805900``: seven fractional digits);
``ContextTokens``
    the prompt's length in tokens;
``GeneratedTokens``
    the output's length in tokens.

A row becomes an fpmcore request whose ``request_id`` is its line number and whose
``arrival_time`` is its ``TIMESTAMP`` in seconds after the first row's (computed from the integer
date and the fraction's digits, so no precision is lost to floating point before the difference).
A row with 0 generated or 0 context tokens is skipped and counted.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Iterator

from fpmcore.documents.errors import FpmError
from fpmcore.replay.trace import TraceRequest
from fpmcore.traces import csvrows
from fpmcore.traces.format import ArrivalOrder, SkippedRow, TraceFormat, TraceSource

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


@functools.cache
def _stamp() -> re.Pattern[str]:
    """A ``TIMESTAMP``'s text, compiled when an Azure trace is first read (not by every replay)."""
    return re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?$")


def timestamp_ns(text: str, line: int, where: str) -> int:
    """Nanoseconds since 1970 of a ``YYYY-MM-DD HH:MM:SS[.fraction]`` timestamp (read as UTC)."""
    m = _stamp().match(text)
    try:
        if m is None:
            raise ValueError
        import calendar  # here, not at the top: imported with every replay, needed by Azure traces only

        whole = calendar.timegm(time.strptime(f"{m[1]} {m[2]}", "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        shown = repr(text) if len(text) <= 40 else repr(text[:37] + "…")
        raise FpmError("T-2", f"line {line}: TIMESTAMP must be a date and time like 2023-11-16 18:15:46.6805900, "
                              f"found {shown}", where) from None  # fmt: skip
    fraction = (m[3] or "").ljust(9, "0")
    return whole * 10**9 + int(fraction)


def read(source: TraceSource) -> Iterator[TraceRequest | SkippedRow]:
    where = source.where
    order = ArrivalOrder(where)
    first: int | None = None
    for n, row in csvrows.rows(source, COLUMNS, "an Azure LLM inference trace"):
        ns = timestamp_ns(row["TIMESTAMP"], n, where)
        first = ns if first is None else first
        prompt = csvrows.count(row["ContextTokens"], "ContextTokens", n, where)
        output = csvrows.count(row["GeneratedTokens"], "GeneratedTokens", n, where)
        arrival = order.relative((ns - first) / 1e9, n)
        skipped = csvrows.zero_lengths(prompt, output, "ContextTokens", "GeneratedTokens")
        if skipped is not None:
            yield skipped
        else:
            yield TraceRequest(request_id=str(n), prompt_len=prompt, output_len=output, arrival_time=arrival)


AZURE = TraceFormat(
    name="azure",
    summary="Azure LLM inference traces: CSV TIMESTAMP (date and time), ContextTokens, GeneratedTokens",
    sniff=lambda head: csvrows.header_matches(head, COLUMNS),
    read=read,
)

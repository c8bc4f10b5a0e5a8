"""The BurstGPT trace format (HPMLL/BurstGPT: Azure OpenAI GPT service traces of a university campus).

CSV with a header; the columns, as the release's README defines them:

``Timestamp``
    the request's submission time in seconds from the start of the trace;
``Model``
    the model called, ``ChatGPT`` or ``GPT-4``;
``Request tokens``, ``Response tokens``
    the prompt's and the response's lengths in tokens;
``Total tokens``
    their sum (not read);
``Log Type``
    ``Conversation log`` or ``API log``.

A row becomes an fpmcore request whose ``request_id`` is its line number and whose ``arrival_time``
is its ``Timestamp`` relative to the first row's.  A row with 0 response tokens is a failed request
of the release: it is skipped and counted (``Response tokens 0``), as is a row with 0 request
tokens.  ``--trace-filter model=GPT-4`` and ``--trace-filter log-type="API log"`` keep only the
rows whose column equals the value (case-insensitive); the others are counted as filtered out.
"""

from __future__ import annotations

from collections.abc import Iterator

from fpmcore.documents.errors import FpmError
from fpmcore.replay.trace import TraceRequest
from fpmcore.traces import csvrows
from fpmcore.traces.format import ArrivalOrder, SkippedRow, TraceFormat, TraceSource

COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Log Type")
#: ``--trace-filter`` key → the column it selects on.
FILTERS = {"model": "Model", "log-type": "Log Type"}


def read(source: TraceSource) -> Iterator[TraceRequest | SkippedRow]:
    where = source.where
    order = ArrivalOrder(where)
    wanted = []
    for key, value in source.filters:
        if key not in FILTERS:
            raise FpmError("T-3", f"--trace-filter {key}: burstgpt selects on {', '.join(FILTERS)}", where)
        wanted.append((FILTERS[key], value.casefold()))
    for n, row in csvrows.rows(source, COLUMNS, "a BurstGPT trace"):
        t = csvrows.seconds(row["Timestamp"], "Timestamp", n, where)
        prompt = csvrows.count(row["Request tokens"], "Request tokens", n, where)
        output = csvrows.count(row["Response tokens"], "Response tokens", n, where)
        arrival = order.relative(t, n)
        skipped = csvrows.zero_lengths(prompt, output, "Request tokens", "Response tokens")
        if skipped is not None:
            yield skipped
        elif any(row[column].casefold() != value for column, value in wanted):
            yield SkippedRow("filtered out by --trace-filter")
        else:
            yield TraceRequest(request_id=str(n), prompt_len=prompt, output_len=output, arrival_time=arrival)


BURSTGPT = TraceFormat(
    name="burstgpt",
    summary="BurstGPT: CSV Timestamp (s), Model, Request tokens, Response tokens, Total tokens, Log Type",
    sniff=lambda head: csvrows.header_matches(head, COLUMNS),
    read=read,
    filters=tuple(FILTERS),
)

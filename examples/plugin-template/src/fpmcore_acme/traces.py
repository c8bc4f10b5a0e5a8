"""Acme's request log as a trace format (the ``fpm_trace_formats`` hook): ``fpm replay --trace acme.log``.

Acme's serving front end logs one request per line, after a ``# acme-log v1`` header line::

    # acme-log v1
    <arrival, ms since the log started> <prompt tokens> <output tokens> <status>

A request whose status is not ``ok`` never reached the engine: it is skipped (counted by fpm).
The reader streams the file (``source.lines()``), names the line of a malformed row, and gives
each request its line number as id.
"""

from __future__ import annotations

from collections.abc import Iterator

from fpmcore.plugin_api import FpmError, SkippedRow, TraceFormat, TraceRequest, TraceSource

HEADER = b"# acme-log v1"


def read(source: TraceSource) -> Iterator[TraceRequest | SkippedRow]:
    for n, text in source.lines():
        if n == 1 or not text.strip():
            continue  # the header
        fields = text.split()
        if len(fields) != 4 or not all(f.isdigit() for f in fields[:3]):
            raise FpmError("T-2", f"line {n}: expected '<arrival ms> <prompt> <output> <status>', found {text[:40]!r}",
                           source.where)  # fmt: skip
        arrival_ms, prompt, output = (int(f) for f in fields[:3])
        if fields[3] != "ok" or prompt == 0 or output == 0:
            yield SkippedRow(f"status {fields[3]}" if fields[3] != "ok" else "empty request")
            continue
        yield TraceRequest(request_id=str(n), arrival_time=arrival_ms / 1000, prompt_len=prompt, output_len=output)


ACME_LOG = TraceFormat(
    name="acme-log",
    summary="Acme's serving log: '<arrival ms> <prompt> <output> <status>' lines after '# acme-log v1'",
    sniff=lambda head: head.startswith(HEADER),
    read=read,
)

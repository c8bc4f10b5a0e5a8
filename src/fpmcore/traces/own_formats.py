"""fpmcore's own trace formats: its JSONL (06 R-32) and the oracle's SCHED.json, as trace formats.

``fpmcore`` reads a JSONL trace line by line (:func:`~fpmcore.replay.trace.iter_trace_requests`:
the diagnostics of R-33); ``fpm replay`` and ``fpm trace`` read the lines of its timed form with the C
line reader into columns first (:mod:`fpmcore.traces.column_reader`), and with this reader a file the C
reader does not take whole.  A file that is one JSON document rather than one per line is read whole,
as before: the oracle's SCHED.json (``{"requests": {id: …}}``) is converted, and a profile or a
latency table given as the trace is named for what it is.  Its sniff is the loosest of the host's
(any text that starts with ``{`` or ``[``), so the host sniffs it last.

``sched-json`` is the oracle's SCHED.json named or sniffed on its own (a document that opens with
its ``"requests"`` object); it is a small file of a step-exact comparison, read whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from fpmcore.documents.errors import FpmError
from fpmcore.replay.trace import TraceRequest, from_sched_json, iter_trace_requests, load_trace
from fpmcore.traces.format import TraceFormat, TraceSource, read_head

_SCHED = re.compile(rb'^\s*\{\s*"requests"\s*:\s*\{')


def _sniff_jsonl(head: bytes) -> bool:
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")


def _one_document(source: TraceSource) -> bool:
    """The file is one JSON document, not one per line: it opens with ``{`` and no later line does."""
    head = read_head(source.file)
    return head.lstrip()[:1] == b"{" and b"\n{" not in head


def reads_lines(source: TraceSource) -> bool:
    """The file is read as JSONL, one request per line (not as one document): the C line reader may read it."""
    return not _one_document(source)


def _read_jsonl(source: TraceSource) -> Iterator[TraceRequest]:
    if _one_document(source):
        yield from load_trace(source.file).requests
        return
    yield from iter_trace_requests(
        (text for _n, text in source.lines("R-33", label="trace line", bom=False)), source.where
    )


def _read_sched(source: TraceSource) -> Iterator[TraceRequest]:
    from fpmcore.documents.jsonio import JsonError, loads, read_input

    try:
        obj = loads(read_input(source.file))
    except OSError as exc:
        raise FpmError("R-33", f"cannot read trace: {exc.strerror}", source.where) from None
    except JsonError as exc:
        raise FpmError("R-33", f"SCHED.json: {exc.message}", source.where) from None
    if not isinstance(obj, dict) or "requests" not in obj:
        raise FpmError("R-32", "SCHED.json: not an object with requests", source.where)
    yield from from_sched_json(obj, where=source.where).requests


FPMCORE_JSONL = TraceFormat(
    name="fpmcore",
    summary="fpmcore's JSONL trace, one request per line (fpm schema trace-line); a SCHED.json document too",
    sniff=_sniff_jsonl,
    read=_read_jsonl,
)
SCHED_JSON = TraceFormat(
    name="sched-json",
    summary='the step-exact oracle\'s SCHED.json: {"requests": {id: {prompt_len, max_tokens, arrival_step, …}}}',
    sniff=lambda head: _SCHED.match(head) is not None,
    read=_read_sched,
)

"""Step and request records as JSON lines, written by the C library without a Python object per record.

``fpm replay --out`` writes each record as one line of JSON: the bytes
:func:`fpmcore.documents.jsonio.dumps_output` makes of the record objects of
:mod:`fpmcore.replay.records` (R-34, R-35).  The C library writes the same
bytes straight from the buffers a ``fpm_replay_advance`` call fills
(``fpm_format_steps``, ``fpm_format_requests`` of ``csrc/fpm_records.h``),
with the request ids, prompt and output lengths and arrival times of the
trace as columns (:func:`trace_fields`, built once per replay), and adds to
the summary's aggregates (:class:`~fpmcore.replay.records.RequestStats`) from
columns too.  The record objects serialised by ``dumps_output`` stay the
reference (the Python engine, ``FPM_PUREPYTHON=1``, and the tests compare the
two byte for byte).
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from fpmcore.replay.model import ST_FINISHED, ReplayConfig
from fpmcore.replay.records import RequestStats, reject_reason

if TYPE_CHECKING:
    from fpmcore.replay.trace import Trace

#: Characters orjson writes escaped in a string (a quote, a backslash, the control characters).
_ESCAPED = re.compile(r'[\x00-\x1f"\\]')
#: Room of the first text buffer; it doubles while a chunk's records do not fit.
_FIRST_ROOM = 1 << 20


@attrs.frozen
class RecordLines:
    """The records of one chunk of a :class:`~fpmcore.replay.ReplayRun` as JSON lines (R-34, R-35).

    ``steps`` and ``requests`` are the lines of the chunk's step records and of the requests completed in it
    (the concatenated :func:`~fpmcore.documents.jsonio.dumps_output` of :class:`~fpmcore.replay.ReplayChunk`'s records);
    ``first_step`` is the step number of the chunk's first step record; ``request_records`` the request records
    as objects when they were asked for (else ``None``).
    """

    first_step: int
    steps: bytes
    requests: bytes
    request_records: list[dict[str, Any]] | None = None


@attrs.frozen
class TextList:
    """Strings as the C library takes them: JSON-escaped, without quotes, one after another (``fpm_text_list``)."""

    text: bytes | memoryview
    offsets: array[int] | memoryview
    longest: int


def text_list(strings: Sequence[str]) -> TextList:
    """The strings JSON-escaped as orjson escapes them, without their quotes, and their offsets."""
    joined = "".join(strings)
    if joined.isascii() and not _ESCAPED.search(joined):
        lengths: Sequence[int] = list(map(len, strings))
        text = joined.encode()
    else:
        parts = [orjson.dumps(s)[1:-1] for s in strings]
        lengths = list(map(len, parts))
        text = b"".join(parts)
    return TextList(text, array("q", accumulate(lengths, initial=0)), max(lengths, default=0))


@attrs.frozen
class TraceFields:
    """The trace's side of the records, one entry per trace line: request ids, lengths, arrival times (NaN: none);
    arrays, or the memoryviews of a trace of columns."""

    ids: TextList
    prompt_len: array[int] | memoryview
    output_len: array[int] | memoryview
    arrival_time: array[float] | memoryview


def trace_fields(trace: Trace) -> TraceFields | None:
    """What the records take of the trace's lines (``request_id``, ``prompt_len``, ``output_len``,
    ``arrival_time``) as columns; ``None`` when a value is not of the type the C writer writes (an arrival time
    that is not a float), which leaves the records to the reference.  A trace read into columns
    (:class:`~fpmcore.replay.columns.TraceColumns`) gives its columns themselves, without a copy or a trace line
    per request (the ids of fpmcore's JSONL as read: they need no JSON escape)."""
    columns = trace.columns
    if columns is not None:
        text = columns.id_text()
        return TraceFields(
            ids=text_list(trace.request_ids()) if text is None else TextList(*text),
            prompt_len=columns.prompt_len,
            output_len=columns.output_len,
            arrival_time=columns.arrival_time,
        )
    requests = trace.requests
    arrivals = [r.arrival_time for r in requests]
    if any(t is not None and type(t) is not float for t in arrivals):
        return None
    nan = float("nan")
    return TraceFields(
        ids=text_list([r.request_id for r in requests]),
        prompt_len=array("q", [r.prompt_len for r in requests]),
        output_len=array("q", [r.output_len for r in requests]),
        arrival_time=array("d", [nan if t is None else t for t in arrivals]),
    )


def _native() -> tuple[Any, Any]:
    from fpmcore.replay._native import ffi, lib

    return ffi, lib


class _Text:
    """A text buffer the C library writes into, grown by doubling."""

    def __init__(self, ffi: Any, room: int) -> None:
        self._ffi = ffi
        self.room = 0
        self.ptr: Any = None
        self.grow(room)

    def grow(self, room: int) -> None:
        if room > self.room:
            self.room = max(room, 2 * self.room)
            self.ptr = self._ffi.new("char[]", self.room)

    def take(self, n: int) -> bytes:
        return self._ffi.buffer(self.ptr, n)[:] if n else b""


class LineWriter:
    """Writes the records of a C replay's chunks as JSON lines (``fpm_format_steps``, ``fpm_format_requests``)
    and adds the request records to ``stats``."""

    def __init__(self, cfg: ReplayConfig, fields: TraceFields, ids: Sequence[str], stats: RequestStats) -> None:
        ffi, lib = _native()
        self._ffi, self._lib = ffi, lib
        self._stats = stats
        self._names = ids
        self._fields = fields  # the C structs below point into its arrays
        self._keep = [  # the cdata that own those pointers
            ffi.from_buffer("char[]", fields.ids.text or b"\0"), ffi.from_buffer("int64_t[]", fields.ids.offsets),
            ffi.from_buffer("int64_t[]", fields.prompt_len), ffi.from_buffer("int64_t[]", fields.output_len),
            ffi.from_buffer("double[]", fields.arrival_time),
        ]  # fmt: skip
        id_list = self._id_list = ffi.new("fpm_text_list *")
        id_list.text, id_list.off = self._keep[0], self._keep[1]
        id_list.n, id_list.longest = len(fields.ids.offsets) - 1, fields.ids.longest
        tr = self._trace = ffi.new("fpm_trace_fields *")
        tr.ids = id_list
        tr.prompt_len, tr.output_len, tr.arrival_time = self._keep[2:]
        shape = self._shape = ffi.new("fpm_step_shape *")
        shape.ngroups, shape.block_mode, shape.usable_blocks = len(cfg.groups), int(cfg.block_mode), cfg.usable_blocks
        self._text = _Text(ffi, _FIRST_ROOM)
        self._len, self._next, self._need = ffi.new("int64_t *"), ffi.new("int64_t *"), ffi.new("int64_t *")
        self._latency_room = 0
        self._latency: list[Any] = []

    def steps(self, out: Any) -> bytes:
        """The step records of the steps in ``out`` (an ``fpm_replay_output`` an advance filled)."""
        lib, text = self._lib, self._text
        parts: list[bytes] = []
        first = 0
        while True:
            st = lib.fpm_format_steps(out, first, self._shape, self._id_list, text.ptr, text.room, self._len,
                                      self._next, self._need)  # fmt: skip
            if st not in (lib.FPM_OK, lib.FPM_ENOSPC):
                raise RuntimeError(f"fpm_format_steps failed with status {st}")
            parts.append(text.take(self._len[0]))
            if st == lib.FPM_OK:
                return b"".join(parts)
            first = self._next[0]
            text.grow(max(self._need[0], 2 * text.room))

    def requests(self, done: Any, ndone: int) -> bytes:
        """The request records of ``done[0 .. ndone)`` (``fpm_request_rec``), added to the stats."""
        if ndone == 0:
            return b""
        ffi, stats = self._ffi, self._stats
        if ndone > self._latency_room:
            self._latency_room = max(ndone, 2 * self._latency_room)
            self._latency = [ffi.new("double[]", self._latency_room) for _ in range(3)]
        sums = self._format_requests(done, ndone, None)
        rejected: list[tuple[int, str | None]] = []
        if sums.rejected:  # written again with the reasons, which only Python words
            reasons, rejected = self._reasons(done, ndone)
            sums = self._format_requests(done, ndone, reasons)
        ttft, tpot, e2e = self._latency
        stats.requests += ndone
        stats.finished += sums.finished
        stats.rejected += sums.rejected
        stats.output_tokens += sums.output_tokens
        stats.prefix_hit_tokens += sums.prefix_hit_tokens
        stats.ttft.frombytes(ffi.buffer(ttft, 8 * sums.nttft))
        stats.tpot.frombytes(ffi.buffer(tpot, 8 * sums.ntpot))
        stats.e2e.frombytes(ffi.buffer(e2e, 8 * sums.ne2e))
        for code, reason in rejected:
            stats.add_rejection(code, reason)
        return self._text.take(self._len[0])

    def _format_requests(self, done: Any, ndone: int, reasons: list[Any] | None) -> Any:
        """``fpm_format_requests`` into the text buffer (grown to fit); the sums of the records."""
        ffi, lib, text = self._ffi, self._lib, self._text
        ttft, tpot, e2e = self._latency
        while True:
            sums = ffi.new("fpm_request_sums *")
            st = lib.fpm_format_requests(done, ndone, self._trace, reasons[0] if reasons else ffi.NULL, text.ptr,
                                         text.room, self._len, self._need, ttft, tpot, e2e, sums)  # fmt: skip
            if st == lib.FPM_OK:
                return sums
            if st != lib.FPM_ENOSPC:
                raise RuntimeError(f"fpm_format_requests failed with status {st}")
            text.grow(self._need[0])

    def _reasons(self, done: Any, ndone: int) -> tuple[list[Any], list[tuple[int, str | None]]]:
        """The reject reasons of the chunk's records (JSON strings, empty for null), and each rejection's code."""
        ffi = self._ffi
        texts: list[bytes] = []
        rejected: list[tuple[int, str | None]] = []
        for k in range(ndone):
            r = done[k]
            if r.status == ST_FINISHED:
                texts.append(b"")
                continue
            reason = reject_reason(r.reject_reason, r.reject_a, r.reject_b, self._names[r.request])
            rejected.append((r.reject_reason, reason))
            texts.append(b"" if reason is None else orjson.dumps(reason))
        blob = b"".join(texts)
        lst = ffi.new("fpm_text_list *")
        keep = [ffi.new("char[]", blob or b"\0"), ffi.new("int64_t[]", list(accumulate(map(len, texts), initial=0)))]
        lst.text, lst.off, lst.n, lst.longest = keep[0], keep[1], ndone, max(map(len, texts))
        return [lst, *keep], rejected


def format_double(value: float) -> bytes:
    """One float as the C record writer writes it (``fpm_format_double``): orjson's form of it."""
    ffi, lib = _native()
    buf, n = ffi.new("char[]", 32), ffi.new("int64_t *")
    if lib.fpm_format_double(value, buf, n) != lib.FPM_OK:
        raise RuntimeError("fpm_format_double failed")
    text: bytes = ffi.buffer(buf, n[0])[:]
    return text

"""Reading a Mooncake trace or fpmcore's own JSONL into columns with the C line readers (``csrc/fpm_trace.c``).

:func:`read_columns` streams the (decompressed) file through ``fpm_trace_reader_feed`` in
chunks of :data:`CHUNK` bytes and applies the window (``--start``/``--limit``), the over-long
prompts (``--max-prompt-len``, ``--over-long drop|clip``) and the time transforms
(``--time-scale``, ``--rate``) on the columns, exactly as the reference readers
(:mod:`fpmcore.traces.mooncake`, :func:`fpmcore.replay.trace.iter_trace_requests`) and
:mod:`fpmcore.traces.transforms` do on request objects.  It answers ``None`` whenever the result
could differ from theirs or they would refuse the trace: a line of another shape than the one the
C reader takes (``fpm_trace.h``), a line that breaks a rule of the format, a file that cannot be
read, no request left, a rate of requests that arrive at one time.  The caller then reads the file
with the reference reader, which gives the same trace or the diagnostic naming the line.
"""

from __future__ import annotations

from typing import Any

import attrs

from fpmcore.documents.errors import FpmError
from fpmcore.replay.columns import TraceColumns
from fpmcore.traces.format import TraceSource
from fpmcore.traces.transforms import Transforms

#: Bytes handed to the C reader at a time.
CHUNK = 1 << 20


def available() -> bool:
    """The C library is the backend (``FPM_PUREPYTHON=1`` reads every trace with the reference reader)."""
    from fpmcore.replay import native

    return native.BACKEND == "c"


def read_columns(
    source: TraceSource, t: Transforms, *, own_format: bool = False
) -> tuple[TraceColumns, dict[str, int]] | None:
    """The Mooncake trace (or with ``own_format`` fpmcore's JSONL) of ``source`` after ``t`` as columns, and the
    counts of the transforms; or ``None``."""
    from fpmcore.replay._native import ffi, lib

    w = ffi.new("fpm_trace_window *")
    w.format = lib.FPM_TRACE_FPMCORE if own_format else lib.FPM_TRACE_MOONCAKE
    w.hash_block_tokens = source.hash_block_tokens
    w.start = t.start
    w.end = -1 if t.limit is None else t.start + t.limit
    w.max_prompt_len = -1 if t.max_prompt_len is None else t.max_prompt_len
    w.clip = int(t.over_long == "clip")
    pp = ffi.new("fpm_trace_reader **")
    if lib.fpm_trace_reader_open(w, pp) != lib.FPM_OK:
        return None
    reader = ffi.gc(pp[0], lib.fpm_trace_reader_close)
    consumed, state = ffi.new("int64_t *"), ffi.new("int32_t *")
    try:
        with source.open() as f:
            pending = b""
            while True:
                chunk = f.read(CHUNK)
                buf = pending + chunk if pending else chunk
                st = lib.fpm_trace_reader_feed(reader, buf, len(buf), int(not chunk), consumed, state)
                if st != lib.FPM_OK:
                    return None
                pending = buf[consumed[0] :]
                if state[0] != lib.FPM_TRACE_MORE or not chunk:
                    break
    except (OSError, EOFError, FpmError):  # the reference reader names what is wrong with the file
        return None
    if state[0] == lib.FPM_TRACE_REFUSED:
        return None
    cols = ffi.new("fpm_trace_columns *")
    lib.fpm_trace_reader_columns(reader, cols)
    n = cols.n
    if n == 0:
        return None
    times = _view(ffi, cols.arrival_time, n, "d")
    if own_format:  # fpmcore's JSONL need not be in arrival order
        first, last = min(times), max(times)
    else:  # arrival times never go back in a Mooncake trace
        first, last = times[0], times[n - 1]
    shift = first if t.start > 0 else 0.0
    factor = 1.0 if t.time_scale is None else t.time_scale
    if t.rate is not None:
        span = last - first
        if n < 2 or span <= 0:
            return None
        factor = (n - 1) / span / t.rate
    if shift != 0.0 or factor != 1.0:
        lib.fpm_trace_scale_times(cols.arrival_time, n, shift, factor)
    counts: dict[str, int] = {}
    if cols.over_long_dropped:
        counts["over_long_dropped"] = cols.over_long_dropped
    if cols.over_long_clipped:
        counts["over_long_clipped"] = cols.over_long_clipped
    nothing = _view(ffi, ffi.NULL, 0)
    columns = TraceColumns(
        line=nothing if own_format else _view(ffi, cols.line, n),
        prompt_len=_view(ffi, cols.prompt_len, n),
        output_len=_view(ffi, cols.output_len, n),
        arrival_time=times,
        hash_off=nothing if own_format else _view(ffi, cols.hash_off, n + 1),
        hash_ids=_view(ffi, cols.hash_ids, cols.nids),
        hash_block_tokens=None if own_format else source.hash_block_tokens,
        owner=reader,
    )
    if own_format:
        ids_off = _view(ffi, cols.id_off, n + 1)
        ids = memoryview(ffi.buffer(cols.id_text, ids_off[n]) if ids_off[n] else b"")
        columns = attrs.evolve(columns, ids=ids, ids_off=ids_off, ids_longest=cols.id_longest)
    return columns, counts


def _view(ffi: Any, ptr: Any, n: int, fmt: str = "q") -> memoryview[Any]:
    """``n`` int64 (``q``) or double (``d``) values of the C reader's memory."""
    mem = memoryview(ffi.buffer(ptr, n * 8) if n else b"").cast("B")
    return mem.cast("d") if fmt == "d" else mem.cast("q")

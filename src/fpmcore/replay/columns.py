"""A trace held as columns: one array per field, no Python object per request.

The C line readers (``csrc/fpm_trace.c``, :mod:`fpmcore.traces.column_reader`) give a Mooncake trace
or one of fpmcore's own JSONL as :class:`TraceColumns`: each request's line number, prompt and output
lengths, arrival time, its content-block ids flattened with offsets (a Mooncake trace) and its
``request_id`` (the line number of a Mooncake request; the text of the line in fpmcore's JSONL, held
as one text with offsets).  :class:`ColumnRequests` shows them as the sequence of
:class:`~fpmcore.replay.trace.TraceRequest` a trace holds (each built when it is read), so that every
reader of a trace works on it unchanged; the replay reads the columns themselves
(:mod:`fpmcore.replay.column_engine`), and the request records read one request's fields
(:meth:`TraceColumns.fields`) or the ids as text (:meth:`TraceColumns.id_text`).
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, overload

import attrs

from fpmcore.replay.trace import TraceRequest


class RequestFields(NamedTuple):
    """The trace fields of one request that its R-35 record repeats."""

    request_id: str
    arrival_time: float | None
    prompt_len: int
    output_len: int


@attrs.frozen(eq=False)
class TraceColumns:
    """The requests of a timed trace, as columns.

    ``line``, ``prompt_len``, ``output_len``, ``hash_off`` and ``hash_ids`` are int64 memoryviews,
    ``arrival_time`` a double one; request ``i``'s ids are ``hash_ids[hash_off[i]:hash_off[i + 1]]``.
    Request ``i``'s ``request_id`` is ``ids[ids_off[i]:ids_off[i + 1]]`` (ASCII that needs no JSON
    escape) when ``ids`` is given, else its line number ``line[i]``.  A trace with ``ids`` (fpmcore's
    JSONL) has no content-block ids: ``hash_block_tokens`` is ``None``, and ``line``, ``hash_off`` and
    ``hash_ids`` are empty.  ``owner`` keeps the memory the views show alive.
    """

    line: memoryview
    prompt_len: memoryview
    output_len: memoryview
    arrival_time: memoryview
    hash_off: memoryview
    hash_ids: memoryview
    hash_block_tokens: int | None
    owner: Any = attrs.field(repr=False, default=None)
    ids: memoryview | None = attrs.field(repr=False, default=None)
    ids_off: memoryview | None = attrs.field(repr=False, default=None)
    ids_longest: int = 0

    def __len__(self) -> int:
        return len(self.prompt_len)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as arrays (a sweep hands the trace to its worker processes)."""
        cols = (self.line, self.prompt_len, self.output_len, self.arrival_time, self.hash_off, self.hash_ids)
        ids = None if self.ids is None or self.ids_off is None else (self.ids.tobytes(), array("q", self.ids_off))
        return _from_arrays, (*(array(c.format, c) for c in cols), self.hash_block_tokens, ids, self.ids_longest)

    def request_id(self, i: int) -> str:
        """Request ``i``'s ``request_id``."""
        if self.ids is None or self.ids_off is None:
            return str(self.line[i])
        return str(self.ids[self.ids_off[i] : self.ids_off[i + 1]], "ascii")

    def request(self, i: int) -> TraceRequest:
        """Request ``i`` as a trace line."""
        block = self.hash_block_tokens
        return TraceRequest(
            request_id=self.request_id(i),
            prompt_len=self.prompt_len[i],
            output_len=self.output_len[i],
            arrival_time=self.arrival_time[i],
            hash_ids=None if block is None else tuple(self.hash_ids[self.hash_off[i] : self.hash_off[i + 1]]),
            hash_block_tokens=block,
        )

    def request_ids(self) -> RequestIds:
        """The ``request_id`` of each request, made when read."""
        return RequestIds(self)

    def id_text(self) -> tuple[memoryview, memoryview, int] | None:
        """The request ids as the record writer takes them (JSON-escaped, one after another): the text,
        ``n + 1`` offsets and the longest; ``None`` for ids that are line numbers."""
        if self.ids is None or self.ids_off is None:
            return None
        return self.ids, self.ids_off, self.ids_longest

    def fields(self, i: int) -> RequestFields:
        """The fields of request ``i`` that its record repeats."""
        return RequestFields(self.request_id(i), self.arrival_time[i], self.prompt_len[i], self.output_len[i])


def _from_arrays(
    line: array[int], prompt: array[int], output: array[int], time: array[float], off: array[int], hash_ids: array[int],
    block: int | None, ids: tuple[bytes, array[int]] | None = None, longest: int = 0,
) -> TraceColumns:  # fmt: skip
    """:class:`TraceColumns` over six arrays, the block size and the ids' text and offsets: the unpickled form."""
    text, ids_off = (None, None) if ids is None else (memoryview(ids[0]), memoryview(ids[1]))
    return TraceColumns(memoryview(line), memoryview(prompt), memoryview(output), memoryview(time), memoryview(off),
                        memoryview(hash_ids), block, (line, prompt, output, time, off, hash_ids, ids), text, ids_off,
                        longest)  # fmt: skip


class RequestIds(Sequence[str]):
    """The ``request_id`` of each request of :class:`TraceColumns`, made when read."""

    def __init__(self, columns: TraceColumns) -> None:
        self._columns = columns
        self._index: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self._columns)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self._columns.request_id(k) for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("request id index out of range")
        return self._columns.request_id(i)

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        """The position of ``value``: a binary search of the line numbers, or a map of the ids made once."""
        cols = self._columns
        if cols.ids is None:  # line numbers increase
            try:
                line = int(value) if isinstance(value, str) and value.isdigit() else -1
            except ValueError:
                line = -1
            k = bisect.bisect_left(cols.line, line)
            found = k < len(cols.line) and cols.line[k] == line
        else:
            if self._index is None:
                self._index = {cols.request_id(j): j for j in range(len(cols))}
            k = self._index.get(value, -1) if isinstance(value, str) else -1
            found = k >= 0
        if found and start <= k and (stop is None or k < stop):
            return k
        raise ValueError(f"{value!r} is not a request_id of the trace")


class ColumnRequests(Sequence[TraceRequest]):
    """:class:`TraceColumns` as the sequence of trace lines (each built when read)."""

    def __init__(self, columns: TraceColumns) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns)

    @overload
    def __getitem__(self, i: int) -> TraceRequest: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[TraceRequest, ...]: ...
    def __getitem__(self, i: int | slice) -> TraceRequest | tuple[TraceRequest, ...]:
        n = len(self.columns)
        if isinstance(i, slice):
            return tuple(self.columns.request(k) for k in range(*i.indices(n)))
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("trace request index out of range")
        return self.columns.request(i)

    def __iter__(self) -> Iterator[TraceRequest]:
        return map(self.columns.request, range(len(self.columns)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<ColumnRequests: {len(self)} requests>"

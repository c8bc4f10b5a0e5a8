"""A trace held as columns: one array per field, no Python object per request.

The C reader of Mooncake lines (``csrc/fpm_trace.c``, :mod:`fpmcore.traces.column_reader`) gives a
trace as :class:`TraceColumns`: each request's line number (its ``request_id``), prompt and output
lengths, arrival time, and its content-block ids flattened with offsets.  :class:`ColumnRequests`
shows them as the sequence of :class:`~fpmcore.replay.trace.TraceRequest` a trace holds (each built
when it is read), so that every reader of a trace works on it unchanged; the replay reads the columns
themselves (:mod:`fpmcore.replay.column_engine`), and the request records read one request's fields
(:meth:`TraceColumns.fields`).
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
    """The requests of a timed trace with content-block ids, as columns.

    ``line``, ``prompt_len``, ``output_len``, ``hash_off`` and ``hash_ids`` are int64 memoryviews,
    ``arrival_time`` a double one; request ``i``'s ids are ``hash_ids[hash_off[i]:hash_off[i + 1]]``.
    ``owner`` keeps the memory the views show alive.
    """

    line: memoryview
    prompt_len: memoryview
    output_len: memoryview
    arrival_time: memoryview
    hash_off: memoryview
    hash_ids: memoryview
    hash_block_tokens: int
    owner: Any = attrs.field(repr=False, default=None)

    def __len__(self) -> int:
        return len(self.line)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as arrays (a sweep hands the trace to its worker processes)."""
        cols = (self.line, self.prompt_len, self.output_len, self.arrival_time, self.hash_off, self.hash_ids)
        return _from_arrays, (*(array(c.format, c) for c in cols), self.hash_block_tokens)

    def request(self, i: int) -> TraceRequest:
        """Request ``i`` as a trace line."""
        return TraceRequest(
            request_id=str(self.line[i]),
            prompt_len=self.prompt_len[i],
            output_len=self.output_len[i],
            arrival_time=self.arrival_time[i],
            hash_ids=tuple(self.hash_ids[self.hash_off[i] : self.hash_off[i + 1]]),
            hash_block_tokens=self.hash_block_tokens,
        )

    def request_ids(self) -> RequestIds:
        """The ``request_id`` of each request, made when read."""
        return RequestIds(self)

    def fields(self, i: int) -> RequestFields:
        """The fields of request ``i`` that its record repeats."""
        return RequestFields(str(self.line[i]), self.arrival_time[i], self.prompt_len[i], self.output_len[i])


def _from_arrays(
    line: array[int], prompt: array[int], output: array[int], time: array[float], off: array[int], ids: array[int],
    block: int,
) -> TraceColumns:  # fmt: skip
    """:class:`TraceColumns` over six arrays (and the block size): the unpickled form."""
    return TraceColumns(memoryview(line), memoryview(prompt), memoryview(output), memoryview(time), memoryview(off),
                        memoryview(ids), block, (line, prompt, output, time, off, ids))  # fmt: skip


class RequestIds(Sequence[str]):
    """The ``request_id`` of each request of :class:`TraceColumns` (its line number), made when read."""

    def __init__(self, columns: TraceColumns) -> None:
        self._line = columns.line

    def __len__(self) -> int:
        return len(self._line)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [str(x) for x in self._line[i]]
        return str(self._line[i])

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        """The position of ``value`` (line numbers increase: a binary search)."""
        try:
            line = int(value) if isinstance(value, str) and value.isdigit() else -1
        except ValueError:
            line = -1
        k = bisect.bisect_left(self._line, line)
        if k < len(self._line) and self._line[k] == line and start <= k and (stop is None or k < stop):
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

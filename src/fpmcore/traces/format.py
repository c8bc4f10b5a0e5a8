"""What a trace format is (the answer of ``fpm_trace_formats``) and how a reader gets at its file.

A :class:`TraceFormat` has a name, a ``sniff`` function (the first bytes of
the file → claims it or not) and a streaming ``read`` function (a
:class:`TraceSource` → the trace's requests, one by one, in file order).  A
reader reads its file line by line (:meth:`TraceSource.lines`), so a file of
millions of lines is never held whole as text; only the requests it yields
are kept.  A row the format documents as not a request (a failed request of a
public trace) is yielded as a :class:`SkippedRow`, which the replay counts.
A gzip-compressed file (``.gz``, told by its first bytes) is read through
:mod:`gzip` by every format.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, cast

import attrs

from fpmcore.documents.errors import FpmError
from fpmcore.documents.paths import path_text
from fpmcore.replay.trace import TraceRequest

if TYPE_CHECKING:
    from pathlib import Path

#: Bytes of the (decompressed) file a ``sniff`` function is given.
SNIFF_BYTES = 64 * 1024
#: ``--hash-block-tokens`` when not given: the Mooncake release's block size.
DEFAULT_HASH_BLOCK_TOKENS = 512
#: The largest length a reader accepts (the replay's own bound, 06 RD-4) and the largest content-block id.
MAX_TOKENS = 2**40
MAX_HASH_ID = 2**63 - 1
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}$")


def _format_name(_inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValueError(f"a trace format's name is lowercase letters, digits and '-' (at most 32); got {value!r}")


@attrs.frozen
class SkippedRow:
    """A row of the file that is not a request by the format's own definition; ``reason`` counts it."""

    reason: str


@attrs.frozen
class TraceSource:
    """What a reader reads: the file, where messages point (``where``), and the options of the command line.

    ``file`` is the file's path as messages name it (``str(pathlib.Path(...))`` of what the command line
    gave), :attr:`path` the same as a :class:`pathlib.Path`.  ``hash_block_tokens`` is
    ``--hash-block-tokens`` (the tokens one content-block id stands for, for formats that carry block ids);
    ``filters`` the ``--trace-filter KEY=VALUE`` pairs, keys among the format's :attr:`TraceFormat.filters`.
    """

    file: str
    hash_block_tokens: int = DEFAULT_HASH_BLOCK_TOKENS
    filters: tuple[tuple[str, str], ...] = ()

    @property
    def path(self) -> Path:
        """The file as a :class:`pathlib.Path` (pathlib is imported when a reader asks for it)."""
        from pathlib import Path

        return Path(self.file)

    @property
    def where(self) -> str:
        return self.file

    def open(self) -> IO[bytes]:
        """The file's bytes, decompressed when it is gzip; a FIFO, device or folder is refused (R-33)."""
        return open_trace_file(self.file)

    def lines(self, rule: str = "T-2", *, label: str = "line", bom: bool = True) -> Iterator[tuple[int, str]]:
        """``(line number, text)`` of each line, without its line end, read one at a time.

        A line that is not UTF-8 is refused with ``rule``, naming the line (``label`` N); a byte-order
        mark at the start is dropped (``bom``: a spreadsheet writes one into a CSV) or refused.
        """
        n = 0
        with self.open() as f:
            try:
                for n, raw in enumerate(f, start=1):
                    if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                        if not bom:
                            raise FpmError(rule, f"{label} 1: a byte-order mark is not allowed", self.where)
                        raw = raw[3:]
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError:
                        raise FpmError(rule, f"{label} {n}: not UTF-8 text (a binary file?)", self.where) from None
                    yield n, text.rstrip("\r\n")
            except (OSError, EOFError) as exc:  # a gzip file cut short or corrupt
                raise FpmError("R-33", f"cannot read trace after line {n}: {exc}", self.where) from None


#: A reader: the source → its requests (and skipped rows) in file order.
Reader = Callable[[TraceSource], Iterable["TraceRequest | SkippedRow"]]


@attrs.frozen
class TraceFormat:
    """A trace format a plugin adds to ``fpm replay`` and ``fpm trace`` (the answer of ``fpm_trace_formats``).

    ``name`` is what ``--trace-format`` names; ``summary`` one line for listings (where the format comes
    from); ``sniff(head)`` says whether the file whose first bytes (at most :data:`SNIFF_BYTES`,
    decompressed) are ``head`` is of this format: cheap, never raising; ``read(source)`` yields the
    requests (:class:`~fpmcore.replay.trace.TraceRequest`) and :class:`SkippedRow` s in file order,
    streaming, and raises :class:`~fpmcore.documents.errors.FpmError` naming the line of a malformed row;
    ``filters`` the keys of ``--trace-filter`` it reads.
    """

    name: str = attrs.field(validator=_format_name)
    summary: str
    sniff: Callable[[bytes], bool]
    read: Reader
    filters: tuple[str, ...] = ()


def open_trace_file(path: str | os.PathLike[str]) -> IO[bytes]:
    """Open a trace for reading: a regular file (a FIFO or device would block), gzip read through."""
    from fpmcore.documents.jsonio import check_input_file

    try:
        check_input_file(path)
        with open(path, "rb") as f:
            magic = f.read(2)
        if magic == b"\x1f\x8b":
            import gzip

            return cast("IO[bytes]", gzip.open(path, "rb"))  # noqa: SIM115 - returned open
        return open(path, "rb")  # noqa: SIM115 - returned open
    except OSError as exc:
        raise FpmError("R-33", f"cannot read trace: {exc.strerror}", path_text(path)) from None


def read_head(path: str | os.PathLike[str]) -> bytes:
    """The first :data:`SNIFF_BYTES` bytes of the (decompressed) file."""
    with open_trace_file(path) as f:
        try:
            return f.read(SNIFF_BYTES)
        except (OSError, EOFError) as exc:  # a gzip file cut short or corrupt
            raise FpmError("R-33", f"cannot read trace: {exc}", path_text(path)) from None


def first_line(head: bytes) -> str | None:
    """The first non-blank line of ``head`` (a BOM dropped), or ``None`` when there is none or it is not UTF-8."""
    for raw in head.lstrip(b"\xef\xbb\xbf").split(b"\n"):
        if raw.strip():
            try:
                return raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                return None
    return None


def positive_length(value: Any, what: str, line: int, where: str, *, minimum: int = 1) -> int:
    """``value`` as an integer length within ``minimum`` … :data:`MAX_TOKENS`, else the one-line T-2 refusal."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise FpmError("T-2", f"line {line}: {what} must be an integer, found {_show(value)}", where)
    if not minimum <= value <= MAX_TOKENS:
        raise FpmError("T-2", f"line {line}: {what} must be in {minimum}..2**40, found {_show(value)}", where)
    return value


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    return text if len(text) <= 40 else text[:37] + "…"


class ArrivalOrder:
    """Checks that arrival times never go back (T-2 names the line that does); the first row's time is 0."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.first: float | None = None
        self.last = 0.0
        self.last_line = 0

    def relative(self, seconds: float, line: int) -> float:
        """The arrival ``seconds`` relative to the first row's, checked against the row before."""
        if self.first is None:
            self.first = seconds
        t = seconds - self.first
        if t < self.last:
            raise FpmError("T-2", f"line {line}: arrives {self.last - t:.6g} s before line {self.last_line}: the "
                                  "trace must be in arrival order (sort it by time)", self.where)  # fmt: skip
        self.last, self.last_line = t, line
        return t

"""Strict JSON reading and the two writing forms of fpmcore (01 §1.2, §9).

**Reading.**  :func:`loads` (and :func:`load_path` for a file) is the one
reader every input of fpmcore goes through: profiles, evidence folders and
their records, reviewed launches, MODEL.json, plans, traces and latency
tables.  Files are read by :func:`read_input`, which refuses what is not a
regular file and what is larger than :data:`MAX_INPUT_BYTES`.  It refuses, with a :class:`JsonError` (rule ``JSON``) whose message
is one line naming the value and where it sits, what Python's ``json``
silently accepts:

==========================  =====================================================================
input                       message (``<where>`` is ``<JSON path>, line <l> column <c>``)
==========================  =====================================================================
a byte-order mark           ``a byte-order mark is not allowed``
bytes that are not UTF-8    ``not UTF-8 at byte <b> (line <l> column <c>)``
a syntax error              ``invalid JSON: <what> at line <l> column <c>``
a duplicate object key      ``duplicate key '<key>' at <where>``
``NaN``, ``Infinity``       ``NaN is not allowed at <where>``
a number beyond a double    ``number 1e999 is out of range of a double at <where>``
an integer of > 4,300       ``integer of <n> digits exceeds the 4300-digit limit at <where>``
digits
a lone surrogate            ``lone surrogate \\ud800 in a string at <where>``
(``"\\ud800"``)
nesting deeper than 256     ``nesting deeper than 256 levels at line <l> column <c>``
==========================  =====================================================================

The JSON path joins keys with ``.`` and list indexes in brackets, relative to
the document (``deployments[0].resources.cache_groups[2].prefill_checkpoint_blocks``),
as 01 §1.3 and 02 §1 write key paths; a key with a character that is not
printable is shown escaped, so a message is always one line.  The file name
is the error's ``where``.  :attr:`JsonError.reason`, :attr:`~JsonError.path`,
:attr:`~JsonError.line` and :attr:`~JsonError.column` give the parts, for
readers that print their own form (02 I-10, 06 R-33).

The fast path is :mod:`json`'s C scanner with hooks; the position and path
of a refusal are found afterwards by :func:`_locate`, which scans the text
once more and runs only for refused input (up to :data:`LOCATE_LIMIT`
characters; beyond, the message names the value without its place).

Integers are exact and unbounded up to the digit limit.  Where a number is
read as a float, :func:`is_finite_number` says whether it converts to a
finite double, so that an integer above 1e308 is refused by the rule that
reads it and never raises :class:`OverflowError`.

**Writing** has two forms:

* :func:`canonical_bytes` — keys sorted by code point, no whitespace,
  non-ASCII as UTF-8, floats as Python's ``repr``: exactly
  ``json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
  allow_nan=False)``.  Digests are SHA-256 of these bytes (:func:`digest`).
* :func:`file_form_bytes` — keys in the order given, two-space indentation,
  one trailing newline (01 §9.1).

Machine output of the CLI (``--json``) goes through :func:`dumps_output`
(orjson), whose byte form is not contractual.  Files are written by
:mod:`fpmcore.documents.output_files`.
"""

from __future__ import annotations

import errno
import functools
import json
import math
import os
import re
import stat
from json.decoder import scanstring  # type: ignore[attr-defined]  # public since Python 2.6, not in typeshed
from typing import TYPE_CHECKING, Any, BinaryIO

from fpmcore.documents.errors import FpmError

if TYPE_CHECKING:
    import hashlib

#: Deepest nesting of arrays and objects the reader accepts.  fpmcore's documents nest
#: fewer than ten levels; the limit keeps every recursive walker far from Python's own.
MAX_DEPTH = 256
#: Longest integer (in digits) the reader accepts: Python's own limit for ``int(str)``.
MAX_INT_DIGITS = 4300
#: Characters :func:`_locate` scans to place a refusal; a larger input is refused without its place.
LOCATE_LIMIT = 16 * 1024 * 1024
#: Largest input file read (:func:`read_input`): 4 GiB, some twenty million trace lines, far beyond any
#: profile, plan, table or grid; a larger file (or an endless one such as ``/dev/zero``) is refused.
MAX_INPUT_BYTES = 4 * 2**30


class JsonError(FpmError):
    """Input that is not strict JSON (rule ``JSON``).

    ``message`` is the one-line diagnostic (reason and place); ``reason`` the
    reason alone; ``path`` (JSON path, ``""`` for the document itself),
    ``line`` and ``column`` (1-based) are ``None`` when unknown.
    """

    def __init__(
        self,
        message: str,
        where: str = "",
        *,
        reason: str | None = None,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        kind: str = "read",
    ) -> None:
        super().__init__("JSON", message, where)
        self.reason = message if reason is None else reason
        self.path = path
        self.line = line
        self.column = column
        #: ``read``, ``bom``, ``utf8``, ``syntax``, ``duplicate``, ``nonfinite``, ``overflow``,
        #: ``bigint``, ``surrogate`` or ``depth``
        self.kind = kind

    def place(self) -> str:
        """``<path>, line <l> column <c>`` (the parts that are known), or ``""``."""
        parts = []
        if self.path:
            parts.append(self.path)
        if self.line is not None:
            parts.append(f"line {self.line} column {self.column}")
        return ", ".join(parts)

    def within(self, where: str) -> JsonError:
        """The same refusal, naming ``where`` (a file) as its place."""
        self.where = where
        return self


class _Refusal(Exception):
    """Raised by the decoder hooks; :func:`loads` turns it into a located :class:`JsonError`."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(kind, detail)
        self.kind = kind
        self.detail = detail


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refusal("duplicate", key)
            seen.add(key)
    return out


def _constant(name: str) -> Any:
    raise _Refusal("nonfinite", name)


def _checked_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refusal("overflow", text)
    return value


#: Every float is read through :func:`_checked_float`, which refuses one that overflows a double.  Looking
#: for a literal that might overflow first (a three-digit exponent, 309 digits in a row) and reading the
#: others without the check costs more than the check: a regular-expression scan of a number-heavy
#: document takes two to ten times its decoding, the check adds 0–55 % to it.
_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_checked_float)


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """An escaped surrogate code point (the scan of :func:`_locate` decides whether it is lone), a surrogate,
    and :func:`_locate`'s token; compiled when first needed (a document from a file seldom needs any)."""
    return (
        re.compile(r"\\u[dD][89a-fA-F]"),
        re.compile("[\ud800-\udfff]"),
        re.compile(r"[ \t\n\r]*(?:(\")|([{}\[\]:,])|(-?(?:Infinity|\d[\d.eE+-]*))|(true|false|null|NaN))"),
    )


def _show_text(text: str, limit: int = 40) -> str:
    """``text`` on one line: characters that are not printable are escaped, long text shortened."""
    if not text.isprintable():
        text = json.dumps(text, ensure_ascii=True)[1:-1]
    if len(text) > limit:
        text = f"{text[: limit // 2]}…{text[-limit // 4 :]} ({len(text)} characters)"
    return text


def one_line(text: str) -> str:
    """``text`` with every character that is not printable escaped (``\\n``, ``\\x00``, ``\\ud800``): one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else json.dumps(c, ensure_ascii=True)[1:-1] for c in text)


def join_path(path: str, key: str | int) -> str:
    """``path.key`` or ``path[i]`` (01 §1.3, 02 §1 key paths); keys shown printable."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    key = _show_text(key, 80)
    return f"{path}.{key}" if path else key


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - text.rfind("\n", 0, pos)


def _reason(kind: str, detail: str) -> str:
    if kind == "duplicate":
        return f"duplicate key '{_show_text(detail, 80)}'"
    if kind == "nonfinite":
        return f"{detail} is not allowed"
    if kind == "overflow":
        return f"number {_show_text(detail)} is out of range of a double"
    if kind == "bigint":
        return f"integer of {detail} digits exceeds the {MAX_INT_DIGITS}-digit limit"
    if kind == "surrogate":
        return f"lone surrogate {json.dumps(detail, ensure_ascii=True)[1:-1]} in a string"
    if kind == "depth":
        return f"nesting deeper than {MAX_DEPTH} levels"
    raise AssertionError(kind)  # pragma: no cover


def _digits(number: str) -> int:
    return len(number.lstrip("-"))


class _Frame:
    __slots__ = ("is_object", "key", "keys", "expect_key")

    def __init__(self, is_object: bool) -> None:
        self.is_object = is_object
        self.key: str | int = 0
        self.keys: set[str] = set()
        self.expect_key = is_object


def _path(stack: list[_Frame]) -> str:
    path = ""
    for frame in stack:
        path = join_path(path, frame.key)
    return path


def _locate(text: str, kind: str) -> tuple[str, str, int] | None:
    """The first refusal of ``kind`` in document order: ``(detail, path, position)``, or ``None``.

    A scan of the tokens with a stack of the open containers; strings are
    decoded by :func:`json.decoder.scanstring` (C).  Stops at
    :data:`LOCATE_LIMIT` characters and at anything it cannot read.
    """
    stack: list[_Frame] = []
    pos, end = 0, min(len(text), LOCATE_LIMIT)
    match = _patterns()[2].match
    try:
        while pos < end:
            m = match(text, pos)
            if m is None:
                return None
            group = m.lastindex or 0
            start = m.start(group)
            top = stack[-1] if stack else None
            if group == 1:  # a string: a key or a value
                value, pos = scanstring(text, start + 1, True)
                if top is not None and top.is_object and top.expect_key:
                    if kind == "duplicate" and value in top.keys:
                        return value, join_path(_path(stack[:-1]), value), start
                    top.keys.add(value)
                    top.key = value
                    top.expect_key = False
                    if kind == "surrogate" and _patterns()[1].search(value):
                        return _patterns()[1].search(value).group(), _path(stack), start  # type: ignore[union-attr]
                elif kind == "surrogate":
                    found = _patterns()[1].search(value)
                    if found:
                        return found.group(), _path(stack), start
                continue
            token = m.group(group)
            pos = m.end()
            if group == 2:
                if token in "{[":
                    stack.append(_Frame(token == "{"))
                    if kind == "depth" and len(stack) > MAX_DEPTH:
                        return "", "", start
                elif token in "}]":
                    if stack:
                        stack.pop()
                elif token == "," and top is not None:
                    if top.is_object:
                        top.expect_key = True
                    else:
                        top.key = int(top.key) + 1
            elif group == 3:
                if kind == "nonfinite" and token.endswith("Infinity"):
                    return token, _path(stack), start
                if kind == "overflow" and token[-1:].isdigit() and any(c in token for c in ".eE"):
                    if math.isinf(float(token)):
                        return token, _path(stack), start
                if kind == "bigint" and token.lstrip("-").isdigit() and _digits(token) > MAX_INT_DIGITS:
                    return str(_digits(token)), _path(stack), start
            elif group == 4 and kind == "nonfinite" and token == "NaN":
                return token, _path(stack), start
    except (ValueError, IndexError):
        return None
    return None


def _located(kind: str, detail: str, text: str) -> JsonError:
    """The :class:`JsonError` of a refusal found by the fast path, placed by :func:`_locate`."""
    found = _locate(text, kind)
    path: str | None = None
    line = column = None
    if found is not None:
        detail = found[0] or detail
        path = found[1]
        line, column = _line_col(text, found[2])
    reason = _reason(kind, detail)
    err = JsonError(reason, reason=reason, path=path, line=line, column=column, kind=kind)
    place = err.place()
    err.message = f"{reason} at {place}" if place else reason
    return err


def _depth_exceeds(value: Any, limit: int) -> bool:
    """True when ``value`` nests more than ``limit`` containers (iterative)."""
    level: list[Any] = [value]
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        nxt: list[Any] = []
        for v in level:
            children = v.values() if isinstance(v, dict) else v
            nxt.extend(c for c in children if isinstance(c, (dict, list)))
        level = nxt
    return False


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    surrogate = _patterns()[1]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if surrogate.search(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def decode_utf8(data: bytes) -> str:
    """``data`` as text: UTF-8 without a byte-order mark, else a located :class:`JsonError`."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise JsonError("a byte-order mark is not allowed", line=1, column=1, kind="bom")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise JsonError(
            f"not UTF-8 at byte {exc.start} (line {line} column {column})",
            reason=f"not UTF-8 at byte {exc.start}",
            line=line,
            column=column,
            kind="utf8",
        ) from None


def loads(data: bytes | str, where: str = "") -> Any:
    """Parse strict JSON (see the module docstring); raises :class:`JsonError` naming ``where`` (a file)."""
    try:
        from_bytes = not isinstance(data, str)
        text = decode_utf8(bytes(data)) if not isinstance(data, str) else data
        try:
            value = _DECODER.decode(text)
        except _Refusal as exc:
            raise _located(exc.kind, exc.detail, text) from None
        except json.JSONDecodeError as exc:
            reason = f"invalid JSON: {exc.msg}"
            at = " " if reason.endswith(" at") else " at "  # json's "Unterminated string starting at", never "at at"
            raise JsonError(
                f"{reason}{at}line {exc.lineno} column {exc.colno}",
                reason=reason,
                line=exc.lineno,
                column=exc.colno,
                kind="syntax",
            ) from None
        except ValueError as exc:  # int(): more digits than Python converts
            if "digits" not in str(exc):
                raise
            raise _located("bigint", "more than 4300", text) from None
        except RecursionError:
            raise _located("depth", "", text) from None
        # UTF-8 holds no surrogate: only an escape can make one (a str given directly may hold one as is)
        if ("\\u" in text and _patterns()[0].search(text)) or (not from_bytes and _patterns()[1].search(text)):
            if len(text) <= LOCATE_LIMIT:
                found = _locate(text, "surrogate")
                if found is not None:
                    raise _located("surrogate", found[0], text)
            elif _has_lone_surrogate(value):
                raise _located("surrogate", "\ud800", text)
        if (text.count("[") + text.count("{") > MAX_DEPTH) and _depth_exceeds(value, MAX_DEPTH):
            raise _located("depth", "", text)
        return value
    except JsonError as exc:
        raise exc.within(where) from None


def load_path(path: str | os.PathLike[str]) -> Any:
    """Read and parse a file strictly; an unreadable file is a :class:`JsonError` too."""
    return loads(read_bytes(path), where=str(path))


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of an input file (:func:`read_input`); an unreadable one is a :class:`JsonError`
    (``cannot read: <reason>``)."""
    try:
        return read_input(path)
    except OSError as exc:
        raise JsonError(f"cannot read: {exc.strerror or type(exc).__name__}", str(path)) from None


class InputRefused(OSError):
    """An input that is not a regular file, or larger than :data:`MAX_INPUT_BYTES`; ``strerror`` says which."""


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, for a message: ``a file``, ``a directory``, ``a FIFO``, ``a character
    device``, ``a block device``, ``a socket``, ``a symbolic link`` (of an ``lstat``)."""
    for test, kind in ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):  # fmt: skip
        if test(mode):
            return kind
    return "not a regular file"  # pragma: no cover


def _file_kind(mode: int) -> str | None:
    """What a file that is not regular is (:func:`file_kind`); ``None`` for a regular file."""
    return None if stat.S_ISREG(mode) else file_kind(mode)


def _not_regular(kind: str) -> InputRefused:
    return InputRefused(errno.EINVAL, f"{kind}, not a regular file (an input is read from a file)")


def _too_large() -> InputRefused:
    n = MAX_INPUT_BYTES
    limit = f"{n // 2**30} GiB" if n >= 2**30 and n % 2**30 == 0 else f"{n}-byte"
    return InputRefused(errno.EFBIG, f"larger than the {limit} input limit")


def check_input_file(path: str | os.PathLike[str]) -> None:
    """Refuse an input that is not a regular file or is larger than :data:`MAX_INPUT_BYTES` (:class:`InputRefused`),
    before it is opened: a reader that streams its file checks it here (a trace, read line by line)."""
    st = os.stat(path)
    kind = _file_kind(st.st_mode)
    if kind is not None:
        raise _not_regular(kind)
    if st.st_size > MAX_INPUT_BYTES:
        raise _too_large()


def read_input(path: str | os.PathLike[str]) -> bytes:
    """The bytes of an input file: every document and trace fpmcore reads comes through here.

    A FIFO, a device, a socket or a directory is refused before it is opened
    (one would block or never end), and so is a file larger than
    :data:`MAX_INPUT_BYTES`; the file is opened without blocking, checked
    again, and read up to one byte past the limit, so a file that grows
    while it is read is refused too.  Refusals are :class:`InputRefused`
    (an :class:`OSError` whose ``strerror`` is the one-line reason), so the
    ``cannot read …: <strerror>`` of every reader covers them.
    """
    check_input_file(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        opened = os.fstat(fd)
        kind = _file_kind(opened.st_mode)  # replaced between the stat and the open
        if kind is not None:
            raise _not_regular(kind)
        data = _read_bounded(f, opened.st_size)
    if len(data) > MAX_INPUT_BYTES:
        raise _too_large()
    return data


def _read_bounded(f: BinaryIO, size: int) -> bytes:
    """The file's bytes, up to one past :data:`MAX_INPUT_BYTES`; ``size`` is its size when opened.

    Read as ``size + 1`` bytes first (``read(n)`` allocates ``n`` bytes before
    it reads: asking for the limit itself would take 4 GiB of address space
    for every small file), then, only for a file that grew, in pieces.
    """
    data = f.read(min(size, MAX_INPUT_BYTES) + 1)
    if len(data) <= size:
        return data
    parts, total = [data], len(data)
    while total <= MAX_INPUT_BYTES:
        piece = f.read(min(1 << 20, MAX_INPUT_BYTES + 1 - total))
        if not piece:
            break
        parts.append(piece)
        total += len(piece)
    return b"".join(parts)


def is_finite_number(value: Any) -> bool:
    """A JSON number (not a boolean) that converts to a finite double: ``1e308`` yes, ``10**309`` no."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond the range of a double
        return False


def canonical_bytes(value: Any) -> bytes:
    """The canonical form of 01 §9.2 (UTF-8 bytes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def sha256(data: bytes = b"") -> hashlib._Hash:
    """``hashlib.sha256(data)``, for the modules every command imports.

    :mod:`hashlib` is imported here when first called, not at the top: loading
    OpenSSL costs every start about 3 ms, and most commands digest nothing.
    """
    import hashlib

    return hashlib.sha256(data)


def digest(value: Any) -> str:
    """Lowercase hex SHA-256 of :func:`canonical_bytes`."""
    return sha256(canonical_bytes(value)).hexdigest()


def file_form_bytes(value: Any) -> bytes:
    """The file form of 01 §9.1: declaration order, indent 2, trailing newline."""
    return (json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def dumps_output(value: Any) -> bytes:
    """Machine output (``--json``): compact, NaN refused, trailing newline.

    An integer beyond 64 bits (which the strict reader accepts, so an input
    can carry one into a document that is printed back) is written whole, in
    the same compact form, by :mod:`json`.  orjson is imported here, at the first such
    document: a command that prints none (a replay's summary) does not load it.
    """
    import orjson

    try:
        return orjson.dumps(value, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError as exc:
        if "Integer exceeds" not in str(exc):
            raise
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")

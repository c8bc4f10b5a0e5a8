"""Reading the files of a collected run (05 §1): the artifact index and nothing else.

A run directory holds one attempt directory per cell, named by the cell id;
a directory that itself holds ``index.json`` or a rank artifact is one
attempt.  An attempt is read through its artifact index
``{"files": {name: sha256}}``, which the collection runner writes: the reader
opens exactly the indexed files, and refuses the attempt (rule ``INDEX``)
when the index is missing or malformed, names a path that is not a
normalized relative path, or names a file that is missing, is not a regular
file, lies behind a symbolic link or differs from its digest.  Files the
index does not name are never opened, however deep the directories that hold
them.

Symbolic links: the reader follows none below the run directory — not to an
attempt directory, not on the path of an indexed file, wherever the link
points.  The collection runner writes regular files, the index pins their
bytes, and the import refuses links in evidence the same way (I-9); a link
could only make the reader open a file outside the run.  The run directory
itself, and the plan, are opened as named on the command line.

JSON files are read strictly (:mod:`fpmcore.documents.jsonio`: duplicate keys, NaN,
a byte-order mark and non-UTF-8 bytes are refused) and, beyond that, must
hold only valid Unicode strings (a ``\\ud800`` escape without its pair is
refused, naming the field), numbers within the range of a double (``1e999``
and a 400-digit integer are refused, naming the field) and nest at most
:data:`MAX_NESTING` levels deep (a rank artifact nests 10): limits of the
reader, so that no rule meets a value it cannot render or compare.  Line
files (``*.jsonl``, the repetition evidence) are kept as bytes: the rules
that read them parse each line.

The ``files`` mapping of an attempt holds each indexed ``.json`` file by
name as parsed JSON and each ``.jsonl`` file as the list of its lines (bytes,
each with its newline).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from fpmcore.documents.jsonio import JsonError, loads, read_input
from fpmcore.host.hooktypes import Diagnostic
from fpmcore.validate.cell import HEX64, RANK_FILE
from fpmcore.validate.measured_values import js, plain, sha256_hex, shown

INDEX = "index.json"
#: The deepest JSON nesting the reader accepts (a rank artifact nests 10 levels).
MAX_NESTING = 100

_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
#: What may hide a value the reader refuses: a surrogate escape, a 3-digit exponent, 309 digits.
_SUSPECT_VALUE = re.compile(rb"\\u[dD][89a-fA-F]|[eE][+-]?[0-9]{3}|[0-9]{309}")
_DOUBLE_MAX = sys.float_info.max


# ---------------------------------------------------------------------------
# strict JSON beyond fpmcore.documents.jsonio
# ---------------------------------------------------------------------------


def _too_deep(data: bytes) -> bool:
    """Whether valid JSON ``data`` nests deeper than :data:`MAX_NESTING` (read from the bytes).

    String contents are dropped (escaped quotes and backslashes first, then
    every pair of quotes with what they enclose), and the remaining brackets
    lose one innermost level per pass.
    """
    if data.count(b"[") + data.count(b"{") <= MAX_NESTING:
        return False
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    s = data.translate(None, _NOT_STRUCTURE)
    while b'""' in s:  # strings without brackets, and the quotes between adjacent strings
        s = s.replace(b'""', b"")
    if b'"' in s:
        s = b"".join(s.split(b'"')[::2])
    for _ in range(MAX_NESTING):
        if not s:
            return False
        s = s.replace(b"[]", b"").replace(b"{}", b"")
    return bool(s)


def _bad_value(value: Any) -> tuple[str, str] | None:
    """``(path, problem)`` of the first string (key or value) holding a lone surrogate, or number
    beyond the range of a double, in document order."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, v = stack.pop()
        t = type(v)
        if t is str:
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return path, f"is not valid Unicode (a lone surrogate): {_escaped(v)}"
        elif t is float or t is int:
            if not -_DOUBLE_MAX <= v <= _DOUBLE_MAX:
                return path, "is a number beyond the range of a double (1.8e308)"
        elif t is dict:
            items = []
            for k, x in v.items():
                try:
                    k.encode("utf-8")
                except UnicodeEncodeError:
                    return path, f"has a key that is not valid Unicode (a lone surrogate): {_escaped(k)}"
                items.append((f"{path}.{k}" if path else k, x))
            stack.extend(reversed(items))
        elif t is list:
            stack.extend(reversed([(f"{path}[{i}]", x) for i, x in enumerate(v)]))
    return None


def _escaped(text: str) -> str:
    """``text`` with its lone surrogates written as ``\\udXXX`` escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def parse_json(data: bytes, where: str) -> Any:
    """Parse one JSON file strictly; raises :class:`~fpmcore.documents.jsonio.JsonError` naming ``where``."""
    try:
        value = loads(data, where)
    except ValueError as exc:  # an integer of more than 4,300 digits (the interpreter's limit)
        raise JsonError(f"invalid JSON: {exc}", where) from None
    if _too_deep(data):
        raise JsonError(f"nesting deeper than {MAX_NESTING} levels", where)
    if _SUSPECT_VALUE.search(data):
        hit = _bad_value(value)
        if hit is not None:
            raise JsonError(f"value at {hit[0] or '<root>'} {hit[1]}", where)
    return value


def load_json_file(path: str | os.PathLike[str]) -> Any:
    """A JSON file named on the command line (the plan), read as :func:`parse_json` reads artifacts."""
    where = shown(os.fspath(path))
    try:
        data = read_input(path)
    except OSError as exc:
        raise JsonError(f"cannot read: {exc.strerror}", where) from None
    return parse_json(data, where)


# ---------------------------------------------------------------------------
# one attempt
# ---------------------------------------------------------------------------


def name_problem(name: Any) -> str | None:
    """Why an index entry is not a normalized relative path below the attempt, or ``None``."""
    if not isinstance(name, str):
        return f"expected a file name, found {js(name)}"
    parts = name.split("/")
    if not name or name.startswith("/") or "\\" in name or "\0" in name or any(p in ("", ".", "..") for p in parts):
        return "expected a normalized relative path"
    if name == INDEX:
        return "the index cannot index itself"
    return None


class _Unreadable(Exception):
    def __init__(self, message: str) -> None:
        self.message = message


_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _read_below(dir_fd: int, name: str, what: str = "indexed file") -> bytes:
    """The bytes of the regular file ``name`` below the directory ``dir_fd``, never through a link.

    Each component is opened relative to the one before it without following
    links, so nothing can swap a link in between; the file is opened only
    after it was seen to be a regular file (a FIFO or a device is never opened
    for reading) and checked again once open.
    """
    parts = name.split("/")
    fds: list[int] = []
    try:
        cur = dir_fd
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                if last and not stat.S_ISREG(os.stat(part, dir_fd=cur, follow_symlinks=False).st_mode):
                    raise _Unreadable(_not_regular(cur, part, what, name))
                cur = os.open(part, _FLAGS | (os.O_NONBLOCK if last else os.O_DIRECTORY), dir_fd=cur)
            except OSError as exc:
                if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_link(cur, part)):
                    link = "/".join(parts[: i + 1])
                    raise _Unreadable(f"{what} lies behind a symbolic link ({link}): {name}") from None
                if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                    raise _Unreadable(f"{what} is missing: {name}") from None
                raise
            fds.append(cur)
        if not stat.S_ISREG(os.fstat(cur).st_mode):
            raise _Unreadable(f"{what} is not a regular file: {name}")
        chunks = []
        while chunk := os.read(cur, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise _Unreadable(f"{what} cannot be read ({exc.strerror}): {name}") from None
    finally:
        for fd in fds:
            os.close(fd)


def _is_link(dir_fd: int, part: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _not_regular(dir_fd: int, part: str, what: str, name: str) -> str:
    if _is_link(dir_fd, part):
        return f"{what} is a symbolic link: {name}"
    return f"{what} is not a regular file: {name}"


def _index(dir_fd: int) -> tuple[dict[str, str], list[Diagnostic]]:
    """The index's ``files`` entries whose name and digest have the right form, and the problems."""

    def problem(message: str, where: str = INDEX) -> list[Diagnostic]:
        return [Diagnostic("INDEX", message, where)]

    try:
        data = _read_below(dir_fd, INDEX, "artifact index")
    except _Unreadable as exc:
        if exc.message == f"artifact index is missing: {INDEX}":  # 05 §1: only indexed files are read
            return {}, problem(f"artifact index is missing, and the validator reads only indexed files: {INDEX}")
        return {}, problem(exc.message)
    try:
        index = parse_json(data, INDEX)
    except JsonError as exc:
        return {}, problem(f"artifact index is not strict JSON: {exc.message}: {INDEX}")
    entries = index.get("files") if isinstance(index, dict) else None
    if not isinstance(entries, dict):
        return {}, problem(f"artifact index has no files object: {INDEX}")
    for name, digest in entries.items():
        why = name_problem(name)
        if why is not None:
            return {}, problem(f"artifact index entry {js(name)}: {why}: {INDEX}")
        if not (isinstance(digest, str) and HEX64.match(digest)):
            return {}, problem(f"artifact index entry expected a 64-hex SHA-256, found {js(digest)}: {name}", name)
    return entries, []


def read_attempt_at(dir_fd: int) -> tuple[dict[str, Any], list[Diagnostic]]:
    """:func:`read_attempt` of the open directory ``dir_fd``."""
    entries, problems = _index(dir_fd)
    files: dict[str, Any] = {}
    for name in sorted(entries):
        want = entries[name]
        try:
            data = _read_below(dir_fd, name)
        except _Unreadable as exc:
            problems.append(Diagnostic("INDEX", exc.message, name))
            continue
        found = sha256_hex(data)
        if found != want:
            problems.append(
                Diagnostic(
                    "INDEX",
                    f"file differs from the artifact index: expected {plain(want)}, found {found}: {name}",
                    name,
                )
            )
            continue
        if name.endswith(".jsonl"):
            files[name] = data.splitlines(keepends=True)
        elif name.endswith(".json"):
            try:
                files[name] = parse_json(data, name)
            except JsonError as exc:
                problems.append(Diagnostic("JSON", f"{exc.message}: {name}", name))
    return files, problems


def read_attempt(root: str | Path) -> tuple[dict[str, Any], list[Diagnostic]]:
    """Read the indexed files of one attempt directory: ``(files, problems)``.

    ``files`` maps each indexed name to its parsed JSON (``.json``) or its
    lines as bytes, each with its newline (``.jsonl``); ``problems`` lists
    what makes the attempt unreadable (rules ``INDEX`` and ``JSON``); such a
    cell is refused.  ``root`` itself may be a link (it is named by the user).
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        return read_attempt_at(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------
# a run
# ---------------------------------------------------------------------------


@attrs.frozen
class Attempt:
    """One attempt of a run: the cell its directory names (``None``: named by its provenance), how
    diagnostics show it, and its files or the problems that make it unreadable."""

    name: str | None
    label: str
    files: dict[str, Any]
    problems: list[Diagnostic]


def is_one_attempt(run_dir: Path) -> bool:
    """A directory that holds ``index.json`` or a rank artifact itself is one attempt."""
    with os.scandir(run_dir) as it:
        return any(e.name == INDEX or RANK_FILE.match(e.name) for e in it)


def attempts(run_dir: str | Path) -> Iterator[Attempt]:
    """The attempts of a run directory (05 §1), in name order; raises ``OSError`` if it cannot be listed.

    A sub-directory that is a symbolic link is an attempt refused with
    ``INDEX``; files beside the attempt directories are not read.
    """
    base = Path(run_dir)
    if is_one_attempt(base):
        files, problems = read_attempt(base)
        yield Attempt(None, shown(str(base)), files, problems)
        return
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        with os.scandir(fd) as it:
            entries = sorted((e.name, e.is_symlink(), e.is_dir(follow_symlinks=False)) for e in it)
        for name, link, directory in entries:
            label = shown(str(base / name))
            if link:
                if os.path.isdir(base / name):
                    problem = Diagnostic("INDEX", f"attempt directory is a symbolic link: {label}", label)
                    yield Attempt(name, label, {}, [problem])
                continue
            if not directory:
                continue
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _FLAGS, dir_fd=fd)
            except OSError as exc:
                problem = Diagnostic("INDEX", f"attempt directory cannot be read ({exc.strerror}): {label}", label)
                yield Attempt(name, label, {}, [problem])
                continue
            try:
                files, problems = read_attempt_at(sub)
            finally:
                os.close(sub)
            yield Attempt(name, label, files, problems)
    finally:
        os.close(fd)

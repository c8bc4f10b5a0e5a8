"""The results file of a sweep: JSON Lines, one row per run, durable row by row.

A row is one line of canonical JSON (sorted keys, compact)::

    {"error": null, "key": "<sha256>", "profile": "...", "settings": {...},
     "summary": {... the R-35 summary ...}, "table": "...", "task": 0, "trace": "..."}

``error`` is ``{"rule", "message"}`` when the run failed (``summary`` is
``null`` when it never ran; a replay that stopped keeps its summary).

Each row is written with one ``os.write`` of the whole line, then
``fsync``: a row on disk is complete, and a kill at any moment leaves at most
one torn line at the very end, without its newline.  :func:`read_rows`
(``--resume``) drops such a tail (and truncates it away before appending),
so the file always holds whole rows.  Any other unreadable line is not the
mark of a kill, and is refused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fpmcore.documents.errors import FpmError

RULE = "sweep"
ROW_KEYS = ("error", "key", "profile", "settings", "summary", "table", "task", "trace")


def encode(row: dict[str, Any]) -> bytes:
    """One row as its line (canonical JSON and a newline)."""
    from fpmcore.documents.jsonio import canonical_bytes

    return canonical_bytes(row) + b"\n"


def read_rows(path: str | os.PathLike[str]) -> tuple[dict[str, dict[str, Any]], int]:
    """The rows of a results file by key, and the length of its whole lines (a torn tail excluded)."""
    from fpmcore.documents.jsonio import JsonError, loads, read_input

    p = Path(path)
    try:
        data = read_input(p)
    except FileNotFoundError:
        return {}, 0
    except OSError as exc:
        raise FpmError(RULE, f"cannot read results: {exc.strerror}", str(p)) from None
    good = data.rfind(b"\n") + 1  # everything after the last newline is a torn row
    rows: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(data[:good].split(b"\n")[:-1], start=1):
        try:
            row = loads(line)
        except JsonError as exc:
            raise FpmError(RULE, f"results line {n} is not a row: {exc.message}", str(p)) from None
        if not isinstance(row, dict) or set(row) != set(ROW_KEYS):
            raise FpmError(RULE, f"results line {n} is not a row of fpm sweep", str(p))
        rows[row["key"]] = row
    return rows, good


class ResultsWriter:
    """Appends rows to a results file, each durable before the next."""

    def __init__(self, path: str | os.PathLike[str], keep: int) -> None:
        """Open ``path`` for appending after its first ``keep`` bytes (a torn tail is cut away)."""
        self.path = Path(path)
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(self._fd, keep)
            os.lseek(self._fd, keep, os.SEEK_SET)
            os.fsync(self._fd)
            if created:  # the file's name is durable too
                folder = os.open(self.path.parent, os.O_RDONLY)
                try:
                    os.fsync(folder)
                finally:
                    os.close(folder)
        except BaseException:
            os.close(self._fd)
            raise

    def write(self, row: dict[str, Any]) -> None:
        line = memoryview(encode(row))
        while line:
            n = os.write(self._fd, line)
            line = line[n:]
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ROW_KEYS", "ResultsWriter", "encode", "read_rows"]

"""A file path's text as :mod:`pathlib` writes it, without importing :mod:`pathlib`.

The readers name their file in every message and in a replay's provenance as
``str(Path(path))``: repeated and trailing separators and ``.`` parts left out,
``..`` kept.  Importing :mod:`pathlib` (with :mod:`urllib.parse` and
:mod:`ipaddress`, which it imports) is a tenth of a one-request ``fpm replay``,
which needs only these strings; on POSIX they are made here, by the rules of
:class:`pathlib.PurePosixPath`, and elsewhere by :mod:`pathlib` itself.
``tests/test_paths.py`` compares the three functions with :mod:`pathlib`.
"""

from __future__ import annotations

import os


def _root_and_parts(path: str | os.PathLike[str]) -> tuple[str, list[str]]:
    """The root (``""``, ``"/"`` or ``"//"``: POSIX keeps exactly two leading slashes) and the parts."""
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"expected a str or os.PathLike of a str, not {type(text).__name__}")
    root = ""
    if text.startswith("/"):
        root = "//" if text.startswith("//") and not text.startswith("///") else "/"
    return root, [p for p in text.split("/") if p and p != "."]


def path_text(path: str | os.PathLike[str]) -> str:
    """``str(pathlib.Path(path))``."""
    if os.name != "posix":  # pragma: no cover - POSIX is where fpmcore runs
        from pathlib import Path

        return str(Path(path))
    root, parts = _root_and_parts(path)
    return root + "/".join(parts) or "."


def file_name(path: str | os.PathLike[str]) -> str:
    """``pathlib.Path(path).name``: the last part, ``""`` for a root or ``.``."""
    if os.name != "posix":  # pragma: no cover
        from pathlib import Path

        return Path(path).name
    _root, parts = _root_and_parts(path)
    return parts[-1] if parts else ""


def parent_text(path: str | os.PathLike[str]) -> str:
    """``str(pathlib.Path(path).parent)``: the path without its last part (a root or ``.`` is its own)."""
    if os.name != "posix":  # pragma: no cover
        from pathlib import Path

        return str(Path(path).parent)
    root, parts = _root_and_parts(path)
    return root + "/".join(parts[:-1]) or "."

"""Strict JSON reading and the two writing forms of fpmcore (01 §1.2, §9).

Reading (:func:`loads`, :func:`load_path`) refuses what Python's ``json``
silently accepts: duplicate object keys, ``NaN``/``Infinity``, input that is
not UTF-8, and a byte-order mark.  Writing has two forms:

* :func:`canonical_bytes` — keys sorted by code point, no whitespace,
  non-ASCII as UTF-8, floats as Python's ``repr``: exactly
  ``json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
  allow_nan=False)``.  Digests are SHA-256 of these bytes (:func:`digest`).
* :func:`file_form_bytes` — keys in the order given, two-space indentation,
  one trailing newline (01 §9.1).

Machine output of the CLI (``--json``) goes through :func:`dumps_output`
(orjson), whose byte form is not contractual.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

from fpmcore.errors import FpmError


class JsonError(FpmError):
    """Input that is not strict JSON (rule ``JSON``)."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__("JSON", message, where)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JsonError(f"duplicate key '{key}'")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise JsonError(f"{name} is not allowed")


def loads(data: bytes | str, where: str = "") -> Any:
    """Parse strict JSON.  Raises :class:`JsonError` naming ``where`` (a file name)."""
    if isinstance(data, bytes):
        if data.startswith(b"\xef\xbb\xbf"):
            raise JsonError("a byte-order mark is not allowed", where)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonError(f"not UTF-8 at byte {exc.start}", where) from None
    else:
        text = data
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except JsonError as exc:
        raise JsonError(exc.message, where) from None
    except json.JSONDecodeError as exc:
        raise JsonError(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", where) from None
    except RecursionError:
        raise JsonError("nesting too deep", where) from None


def load_path(path: str | os.PathLike[str]) -> Any:
    """Read and parse a file strictly; an unreadable file is a :class:`JsonError` too."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise JsonError(f"cannot read: {exc.strerror}", str(p)) from None
    return loads(data, where=str(p))


def canonical_bytes(value: Any) -> bytes:
    """The canonical form of 01 §9.2 (UTF-8 bytes)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def digest(value: Any) -> str:
    """Lowercase hex SHA-256 of :func:`canonical_bytes`."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


def file_form_bytes(value: Any) -> bytes:
    """The file form of 01 §9.1: declaration order, indent 2, trailing newline."""
    return (json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def dumps_output(value: Any) -> bytes:
    """Machine output (``--json``): compact, NaN refused, trailing newline."""
    return orjson.dumps(value, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS)


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file in the same folder, then rename)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise

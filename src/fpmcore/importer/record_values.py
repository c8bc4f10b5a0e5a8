"""Value helpers of the import: strict JSON with I-10's reasons, printing, first differences.

* :func:`strict_json_reason` gives I-10's reason text for an artifact that the
  one strict reader (:func:`fpmcore.documents.jsonio.loads`) refused.
* :func:`show` prints a value as 02 §1 says: integers plainly, floats as
  Python's ``repr``, booleans as JSON, strings in single quotes, lists and
  objects as canonical JSON.
* :func:`first_difference` walks two JSON values depth first (02 §1) and
  returns the key path of the first difference, or ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeGuard

from fpmcore.documents.jsonio import JsonError, is_finite_number


def strict_json_reason(exc: JsonError) -> str:
    """I-10's reason for an artifact the strict reader (:func:`fpmcore.documents.jsonio.loads`) refused.

    02 I-10's reasons — ``not UTF-8``, ``syntax error at <line>:<col>``,
    ``duplicate object key '<key>'``, ``non-finite number`` — followed by where
    the refusal sits: ``at <line>:<col>`` and, inside the document, its key
    path in parentheses (fpmcore issue 13 wins over the bare reasons of 02).
    The reader's other refusals keep its reason: a number out of the range
    of a double, an integer beyond 4,300 digits, a lone surrogate, nesting
    deeper than the reader allows.
    """
    kind = exc.kind
    if kind == "utf8":
        reason = "not UTF-8"
    elif kind in ("syntax", "bom"):
        return f"syntax error at {exc.line or 1}:{exc.column or 1}"
    elif kind == "duplicate":
        reason = exc.reason.replace("duplicate key", "duplicate object key", 1)
    elif kind == "nonfinite":
        reason = f"non-finite number {exc.reason.split(' ', 1)[0]}"
    elif kind == "overflow":
        reason = "non-finite number " + exc.reason.removeprefix("number ").removesuffix(" is out of range of a double")
    else:
        reason = exc.reason
    if exc.line is not None:
        reason += f" at {exc.line}:{exc.column}"
    if exc.path:
        reason += f" ({exc.path})"
    return reason


def canonical(value: Any) -> str:
    """Canonical JSON text (01 §9.2)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def show(value: Any) -> str:
    """Print a value as 02 §1 says."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return f"'{value}'"
    try:
        return canonical(value)
    except (TypeError, ValueError):
        return repr(value)


def is_int(value: Any) -> TypeGuard[int]:
    """A JSON integer: ``true`` is not ``1`` and ``1.0`` is not ``1`` (02 §1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_pos_int(value: Any) -> TypeGuard[int]:
    """A JSON integer above 0."""
    return is_int(value) and value > 0


def is_nonneg_int(value: Any) -> TypeGuard[int]:
    """A JSON integer of at least 0."""
    return is_int(value) and value >= 0


def is_number(value: Any) -> bool:
    """A JSON number that is a finite double: ``true`` is not a number, nor is an integer above 1e308."""
    return is_finite_number(value)


def same(a: Any, b: Any) -> bool:
    """Equal as canonical JSON: types must match, so ``1`` ≠ ``1.0`` ≠ ``true`` (02 §1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


def join_path(base: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    return f"{base}.{key}" if base else key


def first_difference(a: Any, b: Any, path: str = "", key_order: Sequence[str] | None = None) -> str | None:
    """The key path of the first difference between two JSON values (02 §1), or ``None``.

    Objects are walked by the union of their keys in code-point order (or in
    ``key_order`` first, for the top level, when given); a key only one side
    holds differs at its own path.  Lists are walked by index.  Scalars differ
    when their canonical JSON differs.
    """
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b))
        if key_order is not None:
            keys = [k for k in key_order if k in a or k in b] + [k for k in keys if k not in key_order]
        for key in keys:
            sub = join_path(path, key)
            if key not in a or key not in b:
                return sub
            found = first_difference(a[key], b[key], sub)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i in range(min(len(a), len(b))):
            found = first_difference(a[i], b[i], join_path(path, i))
            if found is not None:
                return found
        if len(a) != len(b):
            return join_path(path, min(len(a), len(b)))
        return None
    return None if same(a, b) else (path or "<root>")


def layers_label(group: int, names: Sequence[str]) -> str:
    """``group <i> (<first> and <n-1> more)`` or ``group <i> (<layer>)`` (02 §1)."""
    if not names:
        return f"group {group}"
    if len(names) == 1:
        return f"group {group} ({names[0]})"
    return f"group {group} ({names[0]} and {len(names) - 1} more)"

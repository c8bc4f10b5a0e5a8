"""JSON values as the measurement reader compares and renders them (05, diagnostic conventions).

Values are rendered as compact JSON (``true``, ``null``, ``10.0``, ``"10"``),
except strings in plain positions, which are written without quotes; an
absent key is rendered ``absent`` (:data:`ABSENT`).  Floats are compared with
``isclose(a, b, rel=1e-9, abs=1e-12)`` (:func:`close`).

Also here: the digests the reader recomputes — ``point_key`` (05 §4.2), the
benchmark-point manifest of a list of points (04 G-22) and the canonical
digest of 04 G-23 — and the upper median of 05 §4.2.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from fpmcore.documents.jsonio import canonical_bytes

__all__ = [
    "ABSENT",
    "canonical_bytes",
    "canonical_digest",
    "close",
    "first_difference",
    "get",
    "is_int",
    "is_number",
    "js",
    "manifest_of",
    "plain",
    "point_key",
    "same",
    "sha256_hex",
    "shown",
    "upper_median",
    "trimmed_mean",
    "reduce_samples",
    "estimate_method",
    "UPPER_MEDIAN",
    "TRIMMED_MEAN",
    "PRODUCER_REDUCTIONS",
]


class _Absent:
    """Marker of an absent key; rendered ``absent``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "absent"


ABSENT: Any = _Absent()


def js(value: Any) -> str:
    """Compact JSON of ``value`` (keys sorted); ``absent`` for :data:`ABSENT`."""
    if value is ABSENT:
        return "absent"
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)


def plain(value: Any) -> str:
    """A value in a plain position: strings without quotes, everything else as :func:`js`."""
    return value if isinstance(value, str) else js(value)


def shown(name: str) -> str:
    """A file or directory name as text that can be printed and written as JSON.

    The file system may hold names that are not UTF-8 (Python keeps their
    bytes as lone surrogates); they are shown with ``\\xNN`` escapes.
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return name


def is_int(value: Any) -> bool:
    """A JSON integer: ``int`` but not ``bool`` (A-2)."""
    return type(value) is int


def is_number(value: Any) -> bool:
    """A finite JSON number that is not a boolean."""
    t = type(value)
    return t is int or (t is float and math.isfinite(value))


def close(a: float, b: float, rel: float = 1e-9, abs_: float = 1e-12) -> bool:
    """The float comparison of 05: ``isclose(a, b, rel=1e-9, abs=1e-12)``."""
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def get(obj: Any, key: str) -> Any:
    """``obj[key]`` of a JSON object, :data:`ABSENT` when missing or ``obj`` is no object."""
    if obj.__class__ is dict:
        return obj.get(key, ABSENT)
    return obj.get(key, ABSENT) if isinstance(obj, Mapping) else ABSENT


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_digest(value: Any) -> str:
    """04 G-23 ``digest(value)``."""
    return sha256_hex(canonical_bytes(value))


def point_key(point: Mapping[str, Any]) -> str:
    """05 §4.2 ``point_key`` of a Dynamo point."""
    tp = point.get("total_prefill_tokens", 0)
    kv = point.get("total_kv_read_tokens", 0)
    ident = {
        "batch_size": point.get("batch_size"),
        "partition": point.get("partition"),
        "point_type": point.get("point_type"),
        "rows": point.get("rows"),
        "total_kv_read_tokens": 0 if kv is None else kv,
        "total_prefill_tokens": 0 if tp is None else tp,
    }
    if _plain_identity(ident):  # orjson writes exactly the canonical form of these values
        return sha256_hex(orjson.dumps(ident))
    return canonical_digest(ident)


def _plain_identity(ident: dict[str, Any]) -> bool:
    if ident["point_type"] not in ("prefill", "decode") or ident["partition"] is not None:
        return False
    for k in ("batch_size", "total_kv_read_tokens", "total_prefill_tokens"):
        v = ident[k]
        if type(v) is not int or not -(2**63) <= v < 2**63:
            return False
    rows = ident["rows"]
    if rows is None:
        return True
    return type(rows) is list and all(
        type(r) is list and all(type(x) is int and -(2**63) <= x < 2**63 for x in r) for r in rows
    )


def manifest_of(points: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Encode Dynamo points (in id order) as the benchmark-point manifest of 04 G-22."""
    prefill: list[dict[str, Any]] = []
    decode: list[dict[str, Any]] = []
    for p in points:
        if p.get("point_type") == "decode":
            decode.append({"batch_size": p.get("batch_size"), "total_kv_read_tokens": p.get("total_kv_read_tokens")})
        else:
            prefill.append(
                {
                    "batch_size": p.get("batch_size"),
                    "total_prefill_tokens": p.get("total_prefill_tokens"),
                    "total_kv_read_tokens": p.get("total_kv_read_tokens"),
                    "rows": p.get("rows"),
                }
            )
    return {"schema_version": 3, "prefill": prefill, "decode": decode}


def upper_median(values: Sequence[float]) -> float:
    """Sort ascending and take the element at ``len // 2`` (05 §4.2)."""
    s = sorted(values)
    return s[len(s) // 2]


#: The estimate methods of a point's raw samples: the format's upper median (05 §4.2) and this project's
#: time-average (:func:`trimmed_mean`), both over every sample but the first.
UPPER_MEDIAN, TRIMMED_MEAN = "adjacent_upper_median", "adjacent_trimmed_mean"
#: Each estimate method's name in a protocol's ``producer.reduction``.
PRODUCER_REDUCTIONS = {UPPER_MEDIAN: "upper_median_after_first_repetition",
                       TRIMMED_MEAN: "trimmed_mean_after_first_repetition"}  # fmt: skip


def estimate_method(reduction: Any) -> str:
    """The estimate method a protocol's ``producer.reduction`` names (a run before the mean: the upper median)."""
    return next((m for m, r in PRODUCER_REDUCTIONS.items() if r == reduction), UPPER_MEDIAN)


def trimmed_mean(values: Sequence[float]) -> float:
    """The mean of ``values`` without their fastest and slowest tenth (``len // 10`` of each; none below ten
    values), summed exactly (:func:`math.fsum`) so that every reader gets the same bits.

    Why a mean: a served engine's time is the sum of its steps, so the knot that predicts it is a step's
    *expected* time.  On this project's machines a step's time scatters by 12–22 % from one sample to the
    next, in two clusters about 1.5 times apart that alternate within a second, whatever the contention
    counters say; the served steps scatter alike.  A median then takes one cluster, the one holding more
    than half of the samples by chance, and a table of medians predicted the served decode steps 1.3–1.9
    times too fast.  The mean of the samples spread over many passes is the time-average the serving
    sees.  Why trimmed: contention that the counters see is retaken before it becomes a sample; the trim
    keeps one unseen outlier among ten from moving the knot."""
    s = sorted(values)
    k = len(s) // 10
    kept = s[k : len(s) - k]
    return math.fsum(kept) / len(kept)


def reduce_samples(method: str, values: Sequence[float]) -> float:
    """The retained wall time of ``values`` under the estimate method ``method`` (:data:`UPPER_MEDIAN` or
    :data:`TRIMMED_MEAN`)."""
    return trimmed_mean(values) if method == TRIMMED_MEAN else upper_median(values)


def same(a: Any, b: Any) -> bool:
    """JSON equality of two values (a boolean never equals a number; :data:`ABSENT` only itself)."""
    if a.__class__ is b.__class__ and a.__class__ in (str, int):
        return bool(a == b)
    return first_difference(a, b) is None and (a is ABSENT) == (b is ABSENT)


def first_difference(a: Any, b: Any, path: str = "", *, exact: bool = False) -> tuple[str, Any, Any] | None:
    """The first path at which two JSON values differ, with both values there.

    Numbers compare by value (``1`` equals ``1.0``) unless ``exact``; a
    boolean never equals a number.
    """
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            sub = f"{path}.{k}" if path else k
            d = first_difference(a.get(k, ABSENT), b.get(k, ABSENT), sub, exact=exact)
            if d is not None:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            ai, bi = a[i] if i < len(a) else ABSENT, b[i] if i < len(b) else ABSENT
            d = first_difference(ai, bi, f"{path}[{i}]", exact=exact)
            if d is not None:
                return d
        return None
    if a is ABSENT or b is ABSENT:
        return None if a is b else (path, a, b)
    if exact or type(a) is bool or type(b) is bool:
        return None if type(a) is type(b) and a == b else (path, a, b)
    return None if a == b else (path, a, b)

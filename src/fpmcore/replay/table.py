"""The FPM latency table (06 R-27).

A table file is JSON: either a list of rows or ``{"rows": [...]}``, each row
``{"phase": "prefill" | "decode", "batch_size": b, "total_prefill_tokens": t
(prefill only), "total_kv_read_tokens": k, "wall_time_seconds": w}``.  When
the source has one row per DP rank (an optional ``"dp_rank"`` key), the
table keeps the maximum wall time over ranks (R-27).  An object may carry
``"shared_step_seconds"``: the fixed cost of a step that every row includes and
that a step with both phases pays once (RD-15; ``fpm publish`` writes the
smallest decode row's wall time); without it a mixed step is ``P + D``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fpmcore.errors import FpmError
from fpmcore.replay.model import LatencyTable

_ROW_KEYS = {"phase", "batch_size", "total_prefill_tokens", "total_kv_read_tokens", "wall_time_seconds", "dp_rank"}


def _bad(msg: str, where: str) -> FpmError:
    return FpmError("R-27", msg, where)


def _int(row: Mapping[str, Any], key: str, i: int, where: str, minimum: int) -> int:
    v = row.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise _bad(f"latency table row {i}: {key} must be an integer >= {minimum}, found {json.dumps(v)}", where)
    return v


def table_from_rows(
    rows: Iterable[Mapping[str, Any]], where: str = "", shared_step_seconds: Any = 0.0
) -> LatencyTable:
    """Validate rows (R-27) and build the sorted :class:`LatencyTable` (``shared_step_seconds``: RD-15)."""
    s = shared_step_seconds
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s < 0:
        raise _bad(f"latency table shared_step_seconds must be a finite number >= 0, found {json.dumps(s)}", where)
    pre: dict[tuple[int, int, int], float] = {}
    dec: dict[tuple[int, int], float] = {}
    seen: set[tuple[Any, ...]] = set()
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise _bad(f"latency table row {i}: not a json object", where)
        for key in row:
            if key not in _ROW_KEYS:
                raise _bad(f"latency table row {i}: unknown field {key}", where)
        phase = row.get("phase")
        if phase not in ("prefill", "decode"):
            raise _bad(f"latency table row {i}: phase must be prefill or decode, found {json.dumps(phase)}", where)
        b = _int(row, "batch_size", i, where, 1)
        t = _int(row, "total_prefill_tokens", i, where, 1) if phase == "prefill" else 0
        k = _int(row, "total_kv_read_tokens", i, where, 0)
        w = row.get("wall_time_seconds")
        tshow = t if phase == "prefill" else 0
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w <= 0:
            raise _bad(
                "latency table point has a non-positive or non-finite wall time: "
                f"{phase} batch_size={b} total_prefill_tokens={tshow} total_kv_read_tokens={k} wall_time={w}",
                where,
            )
        w = float(w)
        rank = row.get("dp_rank")
        ident = (phase, b, t, k, rank)
        if ident in seen:
            raise _bad(
                f"duplicate latency table point: {phase} batch_size={b} total_prefill_tokens={tshow} "
                f"total_kv_read_tokens={k}",
                where,
            )
        seen.add(ident)
        if phase == "prefill":
            pre[(b, t, k)] = max(pre.get((b, t, k), 0.0), w)
        else:
            dec[(b, k)] = max(dec.get((b, k), 0.0), w)
    return LatencyTable(
        prefill=tuple((b, t, k, w) for (b, t, k), w in sorted(pre.items())),
        decode=tuple((b, k, w) for (b, k), w in sorted(dec.items())),
        shared_step_seconds=float(s),
    )


def load_table(path: str | Path) -> LatencyTable:
    """Read a table file (a list of rows or ``{"rows": [...]}``)."""
    p = Path(path)
    try:
        data = json.loads(p.read_bytes())
    except OSError as exc:
        raise _bad(f"cannot read latency table: {exc.strerror}", str(p)) from None
    except ValueError:
        raise _bad("latency table is not valid json", str(p)) from None
    shared: Any = 0.0
    if isinstance(data, Mapping):
        shared = data.get("shared_step_seconds", 0.0)
        data = data.get("rows")
    if not isinstance(data, list):
        raise _bad("latency table must be a list of rows or an object with rows", str(p))
    return table_from_rows(data, str(p), shared)


def table_rows(table: LatencyTable) -> list[dict[str, Any]]:
    """The file form of a table."""
    out: list[dict[str, Any]] = []
    for b, t, k, w in table.prefill:
        out.append({"phase": "prefill", "batch_size": b, "total_prefill_tokens": t, "total_kv_read_tokens": k,
                    "wall_time_seconds": w})
    for b, k, w in table.decode:
        out.append({"phase": "decode", "batch_size": b, "total_kv_read_tokens": k, "wall_time_seconds": w})
    return out

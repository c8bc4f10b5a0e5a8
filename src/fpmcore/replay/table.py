"""The FPM latency table (06 R-27).

A table file is JSON: either a list of rows or ``{"rows": [...]}``, each row
``{"phase": "prefill" | "decode", "batch_size": b, "total_prefill_tokens": t
(prefill only), "total_kv_read_tokens": k, "wall_time_seconds": w}``.  When
the source has one row per DP rank (an optional ``"dp_rank"`` key), the
table keeps the maximum wall time over ranks (R-27).  An object may carry
``"shared_step_seconds"``: the fixed cost of a step that every row includes and
that a step with both phases pays once (RD-16; ``fpm publish`` writes the
smallest decode row's wall time); without it a mixed step is ``P + D``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from fpmcore.documents.errors import FpmError
from fpmcore.documents.jsonio import JsonError, is_finite_number, loads, read_input
from fpmcore.documents.paths import path_text

if TYPE_CHECKING:  # the model is imported when a table is built: fpm publish names TABLE_SCHEMA at start-up
    from fpmcore.replay.model import LatencyTable

#: ``schema`` of a table file ``fpm publish`` writes (a file may also be a bare list of rows).
TABLE_SCHEMA = "fpmcore.fpm-table/v1"
#: The keys of a row, in the order a row is written; ``dp_rank`` is optional.
ROW_KEYS = ("phase", "batch_size", "total_prefill_tokens", "total_kv_read_tokens", "wall_time_seconds", "dp_rank")
_ROW_KEYS = frozenset(ROW_KEYS)
#: The smallest value of each integer field of a row (``total_prefill_tokens`` on prefill rows only).
INT_MINIMUM = {"batch_size": 1, "total_prefill_tokens": 1, "total_kv_read_tokens": 0, "dp_rank": 0}
PHASES = ("prefill", "decode")


def _bad(msg: str, where: str) -> FpmError:
    return FpmError("R-27", msg, where)


def _int(row: Mapping[str, Any], key: str, i: int, where: str, minimum: int) -> int:
    v = row.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise _bad(f"latency table row {i}: {key} must be an integer >= {minimum}, found {json.dumps(v)}", where)
    from fpmcore.replay.model import MAX_TOKENS

    if v > MAX_TOKENS:  # the C library's bound on counts (FPM_MAX_TOKENS)
        raise _bad(f"latency table row {i}: {key} {v} exceeds the replay limit {MAX_TOKENS}", where)
    return v


def table_from_rows(rows: Iterable[Mapping[str, Any]], where: str = "", shared_step_seconds: Any = 0.0) -> LatencyTable:
    """Validate rows (R-27) and build the sorted :class:`LatencyTable` (``shared_step_seconds``: RD-16)."""
    s = shared_step_seconds
    if not is_finite_number(s) or s < 0:
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
        if phase not in PHASES:
            raise _bad(f"latency table row {i}: phase must be prefill or decode, found {json.dumps(phase)}", where)
        b = _int(row, "batch_size", i, where, INT_MINIMUM["batch_size"])
        t = (
            _int(row, "total_prefill_tokens", i, where, INT_MINIMUM["total_prefill_tokens"])
            if phase == "prefill"
            else 0
        )
        k = _int(row, "total_kv_read_tokens", i, where, INT_MINIMUM["total_kv_read_tokens"])
        w: Any = row.get("wall_time_seconds")
        tshow = t if phase == "prefill" else 0
        if not is_finite_number(w) or w <= 0:
            raise _bad(
                "latency table point has a non-positive or non-finite wall time: "
                f"{phase} batch_size={b} total_prefill_tokens={tshow} total_kv_read_tokens={k} wall_time={w}",
                where,
            )
        w = float(w)
        rank = row.get("dp_rank")
        if rank is not None:
            rank = _int(row, "dp_rank", i, where, INT_MINIMUM["dp_rank"])
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
    from fpmcore.replay.model import LatencyTable

    return LatencyTable(
        prefill=tuple((b, t, k, w) for (b, t, k), w in sorted(pre.items())),
        decode=tuple((b, k, w) for (b, k), w in sorted(dec.items())),
        shared_step_seconds=float(s),
    )


def load_table(path: str | os.PathLike[str]) -> LatencyTable:
    """Read a table file (a list of rows or ``{"rows": [...]}``)."""
    return load_table_document(path)[0]


def load_table_document(path: str | os.PathLike[str]) -> tuple[LatencyTable, dict[str, Any]]:
    """Read a table file: the table and its ``source`` (what ``fpm publish`` recorded; ``{}`` when absent)."""
    where = path_text(path)
    try:
        data = loads(read_input(path))
    except OSError as exc:
        raise _bad(f"cannot read latency table: {exc.strerror}", where) from None
    except JsonError as exc:
        raise _bad(f"latency table is not strict JSON: {exc.message}", where) from None
    shared: Any = 0.0
    source: dict[str, Any] = {}
    if isinstance(data, Mapping):
        shared = data.get("shared_step_seconds", 0.0)
        source = dict(data["source"]) if isinstance(data.get("source"), Mapping) else {}
        data = data.get("rows")
    if not isinstance(data, list):
        raise _bad("latency table must be a list of rows or an object with rows", where)
    return table_from_rows(data, where, shared), source


def check_table_origin(
    source: Mapping[str, Any], model: str, profile_sha256: Callable[[], str], where: str
) -> str | None:
    """R-27: a table published for another model is refused (its ``source.model`` names it); for another
    profile of the same model (``source.profile_sha256``) the note to print is returned, else ``None``.  A
    table without a source (written by hand) is read as it is.  ``profile_sha256`` gives the profile's digest;
    it is called only for a table that names one (a digest is a canonical serialisation and a hash)."""
    theirs = source.get("model")
    if isinstance(theirs, str) and theirs != model:
        raise _bad(f"the latency table was published for the model {theirs}, the profile is of {model}; give a "
                   f"table measured for {model}", where)  # fmt: skip
    sha = source.get("profile_sha256")
    if not isinstance(sha, str):
        return None
    ours = profile_sha256()
    if sha != ours:
        return (f"the latency table {where} was measured with another profile of {model} (profile_sha256 "
                f"{sha[:12]}…, this profile {ours[:12]}…): its timings are used as they are")  # fmt: skip
    return None


def table_rows(table: LatencyTable) -> list[dict[str, Any]]:
    """The file form of a table."""
    out: list[dict[str, Any]] = []
    for b, t, k, w in table.prefill:
        out.append(
            {
                "phase": "prefill",
                "batch_size": b,
                "total_prefill_tokens": t,
                "total_kv_read_tokens": k,
                "wall_time_seconds": w,
            }
        )
    for b, k, w in table.decode:
        out.append({"phase": "decode", "batch_size": b, "total_kv_read_tokens": k, "wall_time_seconds": w})
    return out


def table_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a latency table file, from this reader's declarations (R-27).

    A file is a list of rows or an object with ``rows`` and an optional
    ``shared_step_seconds`` (RD-16; its other keys are not read: ``fpm
    publish`` writes ``schema`` and ``source`` there).  A row
    has the keys :data:`ROW_KEYS` and no other, the integer minimums of
    :data:`INT_MINIMUM` and a positive wall time; ``total_prefill_tokens`` is
    required on prefill rows (and not read on decode rows).  That a point
    appears once per rank is the reader's rule.
    """
    from fpmcore.documents.schema import HEX64_PATTERN, schema_document

    props: dict[str, Any] = {}
    for key in ROW_KEYS:
        if key == "phase":
            props[key] = {"enum": list(PHASES)}
        elif key == "wall_time_seconds":
            props[key] = {"type": "number", "exclusiveMinimum": 0, "description": "the retained wall time; the "
                          "maximum over DP ranks is kept"}  # fmt: skip
        elif key == "total_prefill_tokens":
            props[key] = {"description": "new tokens of the step (prefill rows); not read on decode rows"}
        else:
            props[key] = {"type": "integer", "minimum": INT_MINIMUM[key]}
    prefill_tokens = {"type": "integer", "minimum": INT_MINIMUM["total_prefill_tokens"]}
    row = {
        "type": "object",
        "properties": props,
        "required": ["phase", "batch_size", "total_kv_read_tokens", "wall_time_seconds"],
        "additionalProperties": False,
        "if": {"properties": {"phase": {"const": "prefill"}}},
        "then": {"required": ["total_prefill_tokens"], "properties": {"total_prefill_tokens": prefill_tokens}},
    }
    digest = {"anyOf": [{"type": "string", "pattern": HEX64_PATTERN}, {"type": "null"}]}
    source = {
        "type": "object",
        "description": "where the rows come from (fpm publish)",
        "properties": {
            "run": {"type": "string"}, "run_index_sha256": digest,
            "cells": {"type": "array", "items": {"type": "object", "properties": {
                "cell": {"type": "string"}, "contract": {"type": "string"}}}},
            "plan_sha256": digest, "manifest_sha256": digest, "smoke_manifest_sha256": digest,
            "profile_sha256": digest, "model": {"type": ["string", "null"]}, "runtime": {"type": ["string", "null"]},
            "assessment": {"type": "object", "description": "fpm assess's report of the run: sha256, repeatable, "
                           "summary, accepted_unrepeatable (A-45)"},
        },
    }  # fmt: skip
    rows = {"type": "array", "items": {"$ref": "#/$defs/row"}}
    document = {
        "type": "object",
        "properties": {"schema": {"const": TABLE_SCHEMA}, "description": {"type": "string"}, "source": source,
                       "shared_step_seconds": {"type": "number", "minimum": 0, "description": "the cost every "
                                               "step pays once; a step with prefill and decode lasts P + D - "
                                               "min(S, P, D) (RD-16); absent: P + D"},
                       "rows": rows},
        "required": ["rows"],
    }  # fmt: skip
    return schema_document(
        "fpm-table",
        "FPM latency table (06 R-27)",
        "The forward-pass latency of measured steps: a list of rows, or an object with rows.",
        {"oneOf": [rows, document], "$defs": {"row": row}},
    )

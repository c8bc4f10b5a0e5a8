"""JSON Schemas (draft 2020-12) of the files of a collected attempt (05 §1): shapes, not rules.

Each schema is built from the declarations the reader checks with, so that a
change in the reader changes the schema:

* every integer field comes from A-2's integer schema
  (:data:`~fpmcore.validate.integers.RANK_INT_SCHEMA`,
  :data:`~fpmcore.validate.integers.SIDECAR_INT_SCHEMA`): a field added
  there is an integer here, wherever it sits;
* the fixed values and enumerations come from the rules that compare them
  (:data:`~fpmcore.validate.protocol.PROTOCOL_FIELDS`,
  :data:`~fpmcore.validate.protocol.EXECUTION_EVIDENCE`, the warm-up kinds and
  statuses, :data:`~fpmcore.validate.rows.REDUCTIONS`, the timing bases, graph
  and prompt statuses, :data:`~fpmcore.validate.repetition_evidence.REPETITION_ROLES`,
  the collector provenance fields of A-13, the identity columns of 05 §6.2);
* the keys a rule reads and refuses when absent are ``required``.

Objects are open (``additionalProperties`` allowed) where the reader carries
fields it does not read (05 §2: "other fields are carried but not read"), and
closed where the reader compares the whole object (``execution_evidence``,
A-20) or the format forbids extra fields (the manifest of 04 G-22).  The rules
that relate fields (a contiguous id sequence, equal ranks, a retained wall time
that is the upper median, digests) stay with the reader: a file the schema
accepts can still be refused, with the rule's diagnostic.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from fpmcore.documents.schema import HEX64_PATTERN, array, enum, obj, schema_document
from fpmcore.validate.cell import IDENTITY_COLUMNS
from fpmcore.validate.integers import INT, NINT, RANK_INT_SCHEMA, ROWS, SIDECAR_INT_SCHEMA
from fpmcore.validate.protocol import (
    EXECUTION_EVIDENCE,
    PROTOCOL_FIELDS,
    SYNTHETIC_CONTENT,
    VALIDATION_STATUS,
    WARMUP_KINDS,
    WARMUP_STATUS,
)
from fpmcore.validate.repetition_evidence import REPETITION_ROLES
from fpmcore.validate.rows import GRAPH_STATUSES, PROMPT_STATUSES, REDUCTIONS, TIMING_BASES
from fpmcore.validate.structure import PROVENANCE_CONSTANTS, PROVENANCE_STRINGS

_HEX64 = {"type": "string", "pattern": HEX64_PATTERN}
_STR = {"type": "string"}
_NONEMPTY = {"type": "string", "minLength": 1}
_NUMBER = {"type": "number"}
_BOOL = {"type": "boolean"}
_OPEN = {"type": "object"}


# ---------------------------------------------------------------------------
# the integer fields of A-2, laid over a schema
# ---------------------------------------------------------------------------


def _integer_leaf(spec: Any) -> dict[str, Any]:
    if spec == INT:
        return {"type": "integer"}
    if spec == NINT:
        return {"type": ["integer", "null"]}
    assert spec == ROWS, spec
    return {"type": ["array", "null"], "items": array({"type": "integer"})}


def with_integers(schema: dict[str, Any], int_schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with every field of an A-2 integer schema typed as an integer (a copy).

    A field the integer schema names and ``schema`` does not describe is
    added; a described one keeps its other keywords (a ``minimum``, a
    ``description``) and gets the integer type.
    """
    out = copy.deepcopy(schema)
    _lay(out, int_schema)
    return out


def _lay(schema: dict[str, Any], int_schema: Mapping[str, Any]) -> None:
    props = schema.setdefault("properties", {})
    schema.setdefault("type", "object")
    for key, spec in int_schema.items():
        target = props.setdefault(key, {})
        if isinstance(spec, dict):
            _lay(target, spec)
        elif isinstance(spec, tuple):
            target.setdefault("type", "array")
            items = target.setdefault("items", {})
            if isinstance(spec[1], dict):
                _lay(items, spec[1])
            else:
                items.update(_integer_leaf(spec[1]))
        else:
            leaf = _integer_leaf(spec)
            if spec == ROWS:
                target.update(leaf)
            else:
                target["type"] = leaf["type"]


# ---------------------------------------------------------------------------
# the rank artifact (05 §2 - §4, §7)
# ---------------------------------------------------------------------------


def _point() -> dict[str, Any]:
    """05 §2.1."""
    return obj(
        {
            "point_type": enum(("prefill", "decode")),
            "benchmark_id": {"minimum": 1, "description": "1-based position in the list (A-7)"},
            "batch_size": {"minimum": 1},
            "total_prefill_tokens": {"minimum": 0, "description": "0 on a decode point"},
            "total_kv_read_tokens": {"minimum": 0},
            "rows": {"description": "[[new_tokens, kv_read_tokens], …] per request of a prefill point, null on decode"},
            "partition": {"description": "null: the manifest has no partition (04 G-22)"},
            "expected_cudagraph_mode": _STR,
            "sample_reasons": array(_STR),
        },
        ("point_type", "benchmark_id", "batch_size", "total_kv_read_tokens"),
    )


def _requests() -> dict[str, Any]:
    """``scheduled_requests`` / ``queued_requests`` of an FPM (05 §2.2)."""
    return obj({"var_prefill_length": _NUMBER, "var_decode_kv_tokens": _NUMBER})


def _sample() -> dict[str, Any]:
    """``benchmark_sample`` of a raw FPM (05 §4.3)."""
    return obj(
        {
            "sample_index": {"minimum": 0, "description": "position of the sample in raw_fpms"},
            "forward_index": {"minimum": 0},
            "timing": obj(
                {
                    "basis": enum(TIMING_BASES),
                    "start_monotonic": {"type": ["number", "null"]},
                    "end_monotonic": _NUMBER,
                },
                ("basis", "end_monotonic"),
            ),
            "cudagraph": obj(
                {"status": enum(GRAPH_STATUSES), "runtime_mode": {"type": ["string", "null"]}}, ("status",)
            ),
        },
        ("sample_index", "forward_index", "timing", "cudagraph"),
    )


def _fpm(kind: str) -> dict[str, Any]:
    """A forward-pass metrics object (05 §2.2): ``retained`` (a row's), ``raw`` (a sample)."""
    props: dict[str, Any] = {
        "version": {},
        "worker_id": _STR,
        "dp_rank": {"minimum": 0},
        "counter_id": {"description": "the point's benchmark_id"},
        "wall_time": {**_NUMBER, "description": "seconds, scheduler to output"},
        "scheduled_requests": _requests(),
        "queued_requests": _requests(),
    }
    if kind == "raw":
        props["benchmark_sample"] = _sample()
        return obj(props, ("dp_rank", "counter_id", "wall_time", "benchmark_sample"))
    props["benchmark_measurement"] = obj(
        {
            "schema_version": enum((1,)),
            "dp_rank": {"minimum": 0},
            "point_key": _HEX64,
            "prompts": obj(
                {
                    "status": enum(PROMPT_STATUSES),
                    "sha256": {"anyOf": [_HEX64, {"type": "null"}]},
                    "requests": array(
                        obj({"slot": {"minimum": 0}, "num_tokens": {"minimum": 0}, "sha256": _HEX64},
                            ("slot", "num_tokens", "sha256"))
                    ),
                },
                ("status", "sha256", "requests"),
            ),
            "preparation": obj(
                {"grid_digest": _STR, "completed_points_before": {"minimum": 0}, "kv_seed_regime": _STR,
                 "warmup_records_before": {"minimum": 0}},
                ("grid_digest", "completed_points_before", "kv_seed_regime"),
            ),
            "expected_internal_samples": {"minimum": 1},
            "raw_fpms": array(_fpm("raw"), minItems=1),
            "estimate": obj({"method": enum(REDUCTIONS), "raw_sample_indices": {}}, ("method", "raw_sample_indices")),
        },
        ("schema_version", "dp_rank", "point_key", "prompts", "preparation", "expected_internal_samples",
         "raw_fpms", "estimate"),
    )  # fmt: skip
    return obj(props, ("dp_rank", "counter_id", "wall_time"))


def _protocol() -> dict[str, Any]:
    """``measurement_protocol`` (05 §4.1, A-19, A-20)."""
    props: dict[str, Any] = {name: enum((value,)) for name, value in PROTOCOL_FIELDS}
    props.update(
        content_seed=_STR,
        synthetic_pool_tag=_STR,
        synthetic_content=enum(SYNTHETIC_CONTENT),
        unobserved=array(_NONEMPTY, minItems=1),
        preparation=obj(
            {
                "warmup_iterations": {"minimum": 0},
                "giant_kv_threshold": {"minimum": 0},
                "giant_kv_repeats": {"minimum": 0},
                "prefill_real_seed": _BOOL,
                "decode_real_kv_warmup": _BOOL,
            },
            (
                "warmup_iterations",
                "giant_kv_threshold",
                "giant_kv_repeats",
                "prefill_real_seed",
                "decode_real_kv_warmup",
            ),
        ),  # fmt: skip
        execution_evidence={**enum((dict(EXECUTION_EVIDENCE),)), "description": "exactly this object (A-20)"},
        producer={**_OPEN, "description": "the producer contract's record; only under a contract that owns it (A-17)"},
    )
    required = [name for name, _ in PROTOCOL_FIELDS]
    required += ["content_seed", "synthetic_pool_tag", "synthetic_content", "unobserved", "preparation"]
    return obj(props, required)


def _warmup_evidence() -> dict[str, Any]:
    """``warmup_evidence`` (05 §4.4, A-24)."""
    record = obj(
        {
            "kind": enum(WARMUP_KINDS),
            "status": enum(WARMUP_STATUS),
            "validation": obj({"status": enum(VALIDATION_STATUS), "reason": _STR}, ("status",)),
            "forward_index_start": {"minimum": 0},
            "forward_index_end": {"minimum": 0},
            "observed_forward_count": {"minimum": 0},
            "completed_points_before": {"minimum": 0},
        },
        ("kind", "status", "validation", "forward_index_start", "forward_index_end", "observed_forward_count",
         "completed_points_before"),
    )  # fmt: skip
    return obj({"status": enum(("recorded", "unavailable")), "records": array(record)}, ("status", "records"))


def rank_artifact_schema(int_schema: Mapping[str, Any] = RANK_INT_SCHEMA) -> dict[str, Any]:
    """The body of :func:`rank_artifact_json_schema`, with the integer fields of ``int_schema``."""
    row = obj(
        {"point": _point(), "kv_seed_regime": _STR, "repetition_evidence_sha256": _HEX64,
         "fpms": array(_fpm("retained"))},
        ("point", "fpms"),
    )  # fmt: skip
    group = obj(
        {
            "benchmark_id": {"minimum": 1},
            "point": _point(),
            "expected_dp_ranks": {},
            "complete": _BOOL,
            "wall_time": _NUMBER,
            "rank_results": array(obj({"dp_rank": {"minimum": 0}, "fpms": array(_fpm("retained"))},
                                      ("dp_rank", "fpms"))),
        },
        ("benchmark_id", "point", "expected_dp_ranks", "complete", "wall_time", "rank_results"),
    )  # fmt: skip
    identity = obj({c: _STR for c in IDENTITY_COLUMNS}, IDENTITY_COLUMNS)
    body = obj(
        {
            "schema_version": enum((2,)),
            "artifact_type": enum(("rank",)),
            "status": {**_STR, "description": "complete for a publishable artifact (A-4)"},
            "valid": _BOOL,
            "usable": _BOOL,
            "stop_reason": {"description": "null for a publishable artifact (A-4)"},
            "timing_valid": _BOOL,
            "error": {"description": "null for a publishable artifact (A-4)"},
            "missing_phases": array({}),
            "skipped_points": array({}),
            "run_id": _NONEMPTY,
            "grid_digest": _NONEMPTY,
            "dp": obj({"rank": {"minimum": 0}, "size": {"minimum": 1}}, ("rank", "size")),
            "coverage": obj(
                {"expected_points": {"minimum": 0}, "completed_points": {"minimum": 0},
                 "skipped_points": {"minimum": 0}},
                ("expected_points", "completed_points", "skipped_points"),
            ),  # fmt: skip
            "timing": obj(
                {"started_at": _STR, "completed_at": _STR, "benchmark_elapsed_seconds": {**_NUMBER, "minimum": 0},
                 "measured_iteration_seconds": _NUMBER},
                ("benchmark_elapsed_seconds", "measured_iteration_seconds"),
            ),  # fmt: skip
            "limits": {**_OPEN, "description": "rank-local scheduler limits (not compared across ranks)"},
            "engine": {**_OPEN, "description": "startup provenance, equal on all ranks (05 §3.4)"},
            "execution_mode": _STR,
            "execution_identity": identity,
            "observation_purpose": _STR,
            "producer": _OPEN,
            "serving_config": obj(
                {"mamba_prefill_checkpoint": obj({"blocks": _BOOL}, ("blocks",))}
            ),
            "measurement_protocol": _protocol(),
            "warmup_evidence": _warmup_evidence(),
            "repetition_evidence": obj(
                {"path": _NONEMPTY, "sha256": _HEX64, "records": {"minimum": 0}}, ("path", "sha256", "records")
            ),
            "results": array(row),
            "iteration_groups": array(group),
        },
        ("schema_version", "artifact_type", "status", "valid", "stop_reason", "timing_valid", "error",
         "missing_phases", "skipped_points", "run_id", "grid_digest", "dp", "coverage", "timing", "results",
         "iteration_groups"),
    )  # fmt: skip
    return with_integers(body, int_schema)


def rank_artifact_json_schema() -> dict[str, Any]:
    """JSON Schema of a rank artifact ``r<k>.json`` (05 §2 - §4, §7)."""
    return schema_document(
        "rank-artifact",
        "fpmcore rank artifact (05 §2)",
        "The measurements of one DP rank: status, coverage, timing, the rows (point and retained FPM with its "
        "benchmark_measurement and raw samples) and the iteration groups.  Fields beyond these are carried, not "
        "read.  The reader's rules A-1 … A-40 decide whether an artifact is accepted.",
        rank_artifact_schema(),
    )


# ---------------------------------------------------------------------------
# the other files of an attempt
# ---------------------------------------------------------------------------


def artifact_index_json_schema() -> dict[str, Any]:
    """JSON Schema of the artifact index ``index.json`` (05 §1; :mod:`fpmcore.validate.attempt`)."""
    name = {
        "type": "string",
        "minLength": 1,
        "pattern": r"^(?!/)(?!.*[\\\x00])(?!(.*/)?\.\.?(/|$))(?!.*//)(?!index\.json$)[^\x00]*[^/\x00]$",
        "description": "a normalized relative path below the attempt, not index.json itself",
    }
    body = obj(
        {
            "schema_version": {"type": "integer"},
            "files": {**_OPEN, "propertyNames": name, "additionalProperties": _HEX64},
        },
        ("files",),
    )
    return schema_document(
        "artifact-index",
        "fpmcore artifact index (05 §1)",
        "The files of one attempt, each pinned by the SHA-256 of its bytes; the reader opens exactly these.",
        body,
    )


def manifest_schema() -> dict[str, Any]:
    """The benchmark-point manifest of 04 G-22 (strict: extra fields are refused)."""
    prefill = obj(
        {
            "batch_size": {"type": "integer", "minimum": 1},
            "total_prefill_tokens": {"type": "integer", "minimum": 1},
            "total_kv_read_tokens": {"type": "integer", "minimum": 0},
            "rows": array(
                {"type": "array", "prefixItems": [{"type": "integer", "minimum": 1}, {"type": "integer", "minimum": 0}],
                 "items": False, "minItems": 2, "description": "[new_tokens, kv_read_tokens]"},
                minItems=1,
            ),
        },
        ("batch_size", "total_prefill_tokens", "total_kv_read_tokens", "rows"),
        closed=True,
    )  # fmt: skip
    decode = obj(
        {"batch_size": {"type": "integer", "minimum": 1}, "total_kv_read_tokens": {"type": "integer", "minimum": 1}},
        ("batch_size", "total_kv_read_tokens"),
        closed=True,
    )
    return obj(
        {"schema_version": enum((3,)), "prefill": array(prefill), "decode": array(decode)},
        ("schema_version", "prefill", "decode"),
        closed=True,
    )


def points_json_schema() -> dict[str, Any]:
    """JSON Schema of the staged point manifest ``points.json`` (04 G-22)."""
    return schema_document(
        "points",
        "fpmcore staged point manifest (04 G-22)",
        "The point list a collection staged, as canonical JSON; its SHA-256 is the plan's manifest_sha256 or "
        "smoke_manifest_sha256 (A-10).",
        manifest_schema(),
    )


def provenance_json_schema() -> dict[str, Any]:
    """JSON Schema of a collector provenance file ``provenance.json`` (05 §6.1, A-13)."""
    fixed = [(keys, enum((v,))) for keys, v in PROVENANCE_CONSTANTS]
    fields = [*fixed[:2], (("cell_id",), _NONEMPTY), (("plan_sha256",), _HEX64), *fixed[2:]]
    fields += [(keys, _STR) for keys in PROVENANCE_STRINGS]
    root = obj({}, ())
    for keys, leaf in fields:  # every field A-13 checks is required, its parents too
        node = root
        for key in keys[:-1]:
            node = node["properties"].setdefault(key, obj({}))
        node["properties"][keys[-1]] = leaf
    _require_all(root)
    return schema_document(
        "provenance",
        "fpmcore collector provenance (05 §6.1)",
        "Where an attempt comes from: its cell, the plan hash and the runtime; identical across pods (A-13).",
        root,
    )


def _require_all(schema: dict[str, Any]) -> None:
    schema["required"] = list(schema["properties"])
    for sub in schema["properties"].values():
        if sub.get("type") == "object":
            _require_all(sub)


def repetition_evidence_json_schema() -> dict[str, Any]:
    """JSON Schema of one line of the repetition-evidence sidecar ``repetitions.jsonl`` (05 §7.5)."""
    repetition = obj(
        {
            "index": {"minimum": 0, "description": "0 … k−1 in execution order"},
            "role": enum(REPETITION_ROLES),
            "fpm_count": {"minimum": 1},
            "reason": _STR,
            "raw_sample_index": {"minimum": 0},
            "wall_time": _NUMBER,
        },
        ("index", "role", "fpm_count"),
        allOf=[
            {"if": {"properties": {"role": {"const": "measured"}}},
             "then": {"required": ["raw_sample_index", "wall_time"]}},
            {"if": {"properties": {"role": {"const": "rejected"}}}, "then": {"required": ["reason"]}},
        ],
    )  # fmt: skip
    body = obj({"repetitions": array(repetition)}, ("benchmark_id", "dp_rank", "repetitions"))
    return schema_document(
        "repetition-evidence",
        "fpmcore repetition-evidence line (05 §7.5)",
        "One line per row of a rank, canonical JSON (04 G-23) and a newline; the row's repetition_evidence_sha256 "
        "is the SHA-256 of the line without its newline (A-38).",
        with_integers(body, SIDECAR_INT_SCHEMA),
    )


__all__ = [
    "artifact_index_json_schema",
    "manifest_schema",
    "points_json_schema",
    "provenance_json_schema",
    "rank_artifact_json_schema",
    "repetition_evidence_json_schema",
    "with_integers",
]

#!/usr/bin/env python3
"""Write measurement artifacts in the producer's shape for a plan (05 §1-§7), with synthetic timings.

The artifacts have the exact form the GLM-5.3-Flash producer (contract
``glm53flash_native_graph_policy``) or the DeepSeek V4.1 eager producer writes
into one attempt directory: rank artifacts ``r<k>.json``, the repetition
evidence sidecars, the collector provenance, the staged point manifest and the
artifact index.  Timings are deterministic: every point repeats the raw wall
times of 05 §9.1 scaled by the point's size, so the GLM smoke cell reproduces
the row of §9.1 and the context of §9.2 exactly (benchmark id 2: forwards
23…32, retained 0.0348, ``warmup_records_before`` 12).

Usage::

    python tests/support/make_artifacts.py example [OUT]           # examples/artifacts (both models)
    python tests/support/make_artifacts.py negatives OUT           # one attempt per negative case
    python tests/support/make_artifacts.py cell --plan PLAN --cell ID --out DIR [--ranks N] [--merged]

Every command takes ``--producer-dir DIR`` (default ``examples/artifacts/producer``,
the stand-in producer of the example campaign): the GLM ``producer`` record
carries the SHA-256 of that directory's ``runtime_source_manifest.json`` and
``glm53flash_prefix_scheduler.py`` (05 §7.2), computed from their bytes; the
tool refuses to write a GLM record when either file is missing.  A reader
accepts such artifacts only when its producer files have the same bytes, e.g.
with ``FPM_GLM53FLASH_PRODUCER_DIR`` pointing at the same directory.

``cell`` reads the points the plan staged for the cell (the smoke subset when
the cell's ``point_set`` is ``smoke``, else the full list) from
``options.benchmark_points``.  The library functions (:func:`glm_cell`,
:func:`dsv41_cell`, :func:`serialize`, :func:`write_attempt`) are used by the
tests and the benchmark.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import inspect
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fpmcore.documents.jsonio import canonical_bytes
from fpmcore.validate.measured_values import canonical_digest, point_key, upper_median
from fpmcore.validate.structure import merge_ranks

ROOT = Path(__file__).resolve().parents[2]
#: The producer files of the example campaign (a stand-in of the producer, see its README).
PRODUCER_DIR = ROOT / "examples" / "artifacts" / "producer"
#: Raw wall times of 05 §9.1 (seconds); every point scales this pattern.
PATTERN = (0.0360, 0.0348, 0.0347, 0.0349, 0.0346, 0.0350, 0.0348, 0.0351, 0.0347, 0.0352)
T0 = 5121.1  # monotonic start of forward 0 (forward f starts at T0 + 0.1 f)
H = 2176  # hash block of the GLM deployment (04 §9)
GLM_MODEL = "zai-org/GLM-5.3-Flash"
GLM_REVISION = "04c4e9e95c5da8862dced7e5056455116f83a7e0"
DSV41_MODEL = "deepseek-ai/DeepSeek-V4.1"
VLLM = "0.33.0"
CHECKPOINT = {"alignment": 16, "blocks": True}
#: SHA-256 of the staged model-config.json of the example cells (identity column).
GLM_CONFIG_SHA256 = hashlib.sha256(b'{"architectures":["Glm53FlashForCausalLM"]}').hexdigest()
DSV41_CONFIG_SHA256 = hashlib.sha256(b'{"architectures":["DeepseekV41ForCausalLM"]}').hexdigest()

#: The smoke subset of 04 G-24 with the checkpoint rule (5 points), as a G-22 manifest.
SMOKE_MANIFEST = {
    "schema_version": 3,
    "prefill": [
        {"batch_size": 1, "total_prefill_tokens": 64, "total_kv_read_tokens": 0, "rows": [[64, 0]]},
        {"batch_size": 1, "total_prefill_tokens": 64, "total_kv_read_tokens": H, "rows": [[64, H]]},
        {"batch_size": 1, "total_prefill_tokens": 2 * H, "total_kv_read_tokens": H, "rows": [[2 * H, H]]},
    ],
    "decode": [{"batch_size": 1, "total_kv_read_tokens": 4096}, {"batch_size": 2, "total_kv_read_tokens": 8192}],
}
#: 04 §9: list digest of the FlashKDA list (577 points).
FULL_DIGEST = "9957b8429d4864bd851daf48b557c3ee4c01ff982d04af7619a514f6e036850e"

EXECUTION_EVIDENCE = {
    "schema_version": 1,
    "sample_field": "benchmark_sample",
    "warmup_field": "warmup_evidence",
    "forward_index_scope": "rank_process",
    "timing_clock": "process_local_monotonic",
    "cudagraph_source": "ModelRunnerOutput.cudagraph_stats",
    "warmup_scope": "request_completion_and_existing_shape_validation",
}


def canonical(value: Any) -> bytes:
    return canonical_bytes(value)


def plan_sha256(plan: Mapping[str, Any]) -> str:
    """The plan hash the example plans carry: the digest of the plan without its ``sha256``."""
    return canonical_digest({k: v for k, v in plan.items() if k != "sha256"})


def points_of(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Dynamo points (05 §2.1) of a G-22 manifest, numbered 1…N (prefill first)."""
    out: list[dict[str, Any]] = []
    for e in manifest["prefill"]:
        b, tp = e["batch_size"], e["total_prefill_tokens"]
        out.append(
            {
                "point_type": "prefill",
                "benchmark_id": len(out) + 1,
                "batch_size": b,
                "total_prefill_tokens": tp,
                "total_kv_read_tokens": e["total_kv_read_tokens"],
                "rows": [list(r) for r in e["rows"]],
                "partition": None,
                "expected_cudagraph_mode": "PIECEWISE",
                "expected_capture_size": tp,
                "padding_tokens": 0,
                "sample_reasons": ["explicit"],
            }
        )
    for e in manifest["decode"]:
        b = e["batch_size"]
        out.append(
            {
                "point_type": "decode",
                "benchmark_id": len(out) + 1,
                "batch_size": b,
                "total_prefill_tokens": 0,
                "total_kv_read_tokens": e["total_kv_read_tokens"],
                "rows": None,
                "partition": None,
                "expected_cudagraph_mode": "FULL",
                "expected_capture_size": b,
                "padding_tokens": 0,
                "sample_reasons": ["explicit"],
            }
        )
    return out


def _scale(point: Mapping[str, Any], rank: int) -> float:
    """Deterministic size factor of a point (1.0 for benchmark id 2 of the smoke list on rank 0)."""

    def size(tp: int, kv: int, b: int) -> float:
        return 1.0 + tp / 4096 + kv / 65536 + b / 64

    return (
        size(point["total_prefill_tokens"], point["total_kv_read_tokens"], point["batch_size"])
        / size(64, H, 1)
        * (1.0 + 0.01 * rank)
    )


def raw_walls(point: Mapping[str, Any], rank: int, count: int = 10) -> list[float]:
    s = _scale(point, rank)
    return [round(PATTERN[i % 10] * s, 6) for i in range(count)]


def _counts(point: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    b, tp, kv = point["batch_size"], point["total_prefill_tokens"], point["total_kv_read_tokens"]
    decode = point["point_type"] == "decode"
    sched = {
        "num_prefill_requests": 0 if decode else b,
        "sum_prefill_tokens": 0 if decode else tp,
        "var_prefill_length": 0.0,
        "sum_prefill_kv_tokens": 0 if decode else kv,
        "num_decode_requests": b if decode else 0,
        "sum_decode_kv_tokens": kv if decode else 0,
        "var_decode_kv_tokens": 0.0,
    }
    queued = {
        "num_prefill_requests": 0,
        "sum_prefill_tokens": 0,
        "var_prefill_length": 0.0,
        "num_decode_requests": 0,
        "sum_decode_kv_tokens": 0,
        "var_decode_kv_tokens": 0.0,
    }
    return sched, queued


def _fpm(point: Mapping[str, Any], rank: int, wall: float) -> dict[str, Any]:
    sched, queued = _counts(point)
    return {
        "version": 1,
        "worker_id": f"dp{rank}-worker",
        "dp_rank": rank,
        "counter_id": point["benchmark_id"],
        "wall_time": wall,
        "scheduled_requests": sched,
        "queued_requests": queued,
    }


def _graph(point: Mapping[str, Any], eager: bool) -> dict[str, Any]:
    n = point["total_prefill_tokens"] if point["point_type"] == "prefill" else point["batch_size"]
    mode = "NONE" if eager else point["expected_cudagraph_mode"]
    return {
        "status": "observed",
        "runtime_mode": mode,
        "num_unpadded_tokens": n,
        "num_padded_tokens": n,
        "num_paddings": 0,
    }


def _warmup(kind: str, status: str, start: int, end: int, before: int, reason: str | None = None) -> dict[str, Any]:
    validation: dict[str, Any] = {"status": "failed", "reason": reason} if reason else {"status": "not_performed"}
    return {
        "kind": kind,
        "status": status,
        "validation": validation,
        "forward_index_start": start,
        "forward_index_end": end,
        "observed_forward_count": end - start,
        "completed_points_before": before,
    }


def glm_protocol() -> dict[str, Any]:
    """``measurement_protocol`` of the GLM producer (05 §9.2)."""
    return {
        "schema_version": 1,
        "content_identity": "coordinate_rank_slot_v1",
        "content_seed": "53",
        "synthetic_content": "seeded_tokens",
        "synthetic_pool_tag": "glm53flash_seeded_tokens_v2",
        "prompt_hash_encoding": "uint32_le",
        "independent_repetitions": 1,
        "timing_metric": "scheduler_wall_time",
        "input_evidence_scope": "injected_prompt_token_ids",
        "unobserved": ["sampled_continuation_token_ids", "kv_cache_tensors", "recurrent_state_tensors"],
        "preparation": {
            "warmup_iterations": 0,
            "giant_kv_threshold": 0,
            "giant_kv_repeats": 0,
            "prefill_real_seed": True,
            "decode_real_kv_warmup": True,
        },
        "execution_evidence": dict(EXECUTION_EVIDENCE),
        "producer": {
            "name": "glm53flash_prefix_scheduler",
            "reduction": "upper_median_after_first_repetition",
            "warmup_repetitions": 5,
            "measured_repetitions": 10,
            "max_rejected_repetitions": 10,
            "state_protocol": "glm53flash_prefix_cache_real_seed_v1",
            "timing_boundary": "dynamo_vllm_instrumented_scheduler_fpm_wall_time",
        },
    }


def producer_digests(producer_dir: str | Path = PRODUCER_DIR) -> dict[str, str]:
    """The two digest fields of the ``producer`` record, from the files of ``producer_dir`` (05 §7.2)."""
    from fpmcore_glm53flash.artifact_producer import DIGEST_FIELDS, digests_of

    found = digests_of(producer_dir)
    missing = [DIGEST_FIELDS[f][0] for f, v in found.items() if v is None]
    if missing:
        raise SystemExit(f"no producer file {', '.join(missing)} in {producer_dir}: cannot write a GLM producer record")
    return {f: v for f, v in found.items() if v is not None}


def glm_producer_record(
    model: str = GLM_MODEL, revision: str = GLM_REVISION, producer_dir: str | Path = PRODUCER_DIR
) -> dict[str, Any]:
    """The ``producer`` record of a campaign launched with the producer files of ``producer_dir`` (05 §7.2)."""
    from fpmcore_glm53flash.artifact_producer import (
        INTERNAL_POSITIONS,
        ProducerFiles,
        expected_producer_record,
    )

    return {
        **expected_producer_record(ProducerFiles(producer_digests(producer_dir), str(producer_dir), True)),
        "model": model,
        "model_revision": revision,
        "checkpoint_dir": f"/models/{model}",
        "context_policy": {"measured_context": 131072, "internal_positions": INTERNAL_POSITIONS},
    }


def _rank_doc(
    points: Sequence[Mapping[str, Any]], rank: int, size: int, *, glm: bool, grid_digest: str, run_id: str, samples: int
) -> tuple[dict[str, Any], list[dict[str, Any]], list[bytes], list[dict[str, Any]]]:
    """One rank artifact (without results and groups), its rows, its sidecar lines and its warm-up records."""
    forward = 0
    records: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    lines: list[bytes] = []
    for k, point in enumerate(points):
        reps: list[dict[str, Any]] = []
        prefix = point["point_type"] == "decode" or point["total_kv_read_tokens"] > 0
        if glm and prefix:
            records.append(_warmup("real_prefix_seed", "completed", forward, forward + 1, k))
            forward += 1
            if point["point_type"] == "prefill":  # the first repetition is split at the junction (05 §7.1)
                records.append(_warmup("real_prefix_shape", "failed", forward, forward + 2, k, "split_into_2_forwards"))
                reps.append({"fpm_count": 2, "index": 0, "reason": "split_into_2_forwards", "role": "rejected"})
                forward += 2
        for _ in range(5 if glm else 1):
            records.append(_warmup("real_prefix_shape" if glm else "eager_shape", "completed", forward, forward + 1, k))
            reps.append({"fpm_count": 1, "index": len(reps), "role": "warmup"})
            forward += 1
        walls = raw_walls(point, rank, samples)
        raw = []
        for i, w in enumerate(walls):
            start = round(T0 + 0.1 * forward, 6)
            fpm = _fpm(point, rank, w)
            fpm["benchmark_sample"] = {
                "sample_index": i,
                "forward_index": forward,
                "timing": {
                    "basis": "schedule_to_output",
                    "start_monotonic": start,
                    "end_monotonic": round(start + w, 10),
                },
                "cudagraph": _graph(point, eager=not glm),
            }
            raw.append(fpm)
            reps.append({"fpm_count": 1, "index": len(reps), "raw_sample_index": i, "role": "measured", "wall_time": w})
            forward += 1
        regime = "real_kv" if prefix else "not_applicable"
        indices = list(range(1, samples))
        retained = _fpm(point, rank, upper_median([walls[i] for i in indices]))
        retained["benchmark_measurement"] = {
            "schema_version": 1,
            "dp_rank": rank,
            "point_key": point_key(point),
            "prompts": {"status": "unavailable", "sha256": None, "requests": []},
            "preparation": {
                "grid_digest": grid_digest,
                "completed_points_before": k,
                "kv_seed_regime": regime,
                "warmup_records_before": len(records),
            },
            "expected_internal_samples": samples,
            "estimate": {"method": "adjacent_upper_median", "raw_sample_indices": indices},
            "raw_fpms": raw,
        }
        row: dict[str, Any] = {"point": dict(point), "kv_seed_regime": regime}
        if glm:
            line = canonical({"benchmark_id": point["benchmark_id"], "dp_rank": rank, "repetitions": reps})
            lines.append(line + b"\n")
            row["repetition_evidence_sha256"] = hashlib.sha256(line).hexdigest()
        row["fpms"] = [retained]
        results.append(row)
    n = len(points)
    doc: dict[str, Any] = {
        "schema_version": 2,
        "artifact_type": "rank",
        "status": "complete",
        "valid": True,
        "usable": True,
        "stop_reason": None,
        "timing_valid": True,
        "error": None,
        "missing_phases": [],
        "skipped_points": [],
        "run_id": run_id,
        "grid_digest": grid_digest,
        "dp": {"rank": rank, "size": size},
        "coverage": {"expected_points": n, "completed_points": n, "skipped_points": 0},
        "timing": {"started_at": "2026-11-09T10:00:00Z", "completed_at": "2026-11-09T10:20:00Z"},
        "limits": {
            "max_num_scheduled_tokens": 8192,
            "max_num_running_reqs": 32,
            "max_model_len": 131079,
            "block_size": H,
            "num_gpu_blocks": 13696 + rank,
        },
    }
    return doc, results, lines, records


def _finish(
    docs: list[dict[str, Any]], results: list[list[dict[str, Any]]], points: Sequence[Mapping[str, Any]]
) -> None:
    """Add the results, the synchronized iteration groups and the timing totals to every rank artifact."""
    groups = []
    for k, point in enumerate(points):
        rr = [{"dp_rank": r, "fpms": [copy.deepcopy(res[k]["fpms"][0])]} for r, res in enumerate(results)]
        groups.append(
            {
                "benchmark_id": point["benchmark_id"],
                "point": dict(point),
                "expected_dp_ranks": list(range(len(docs))),
                "complete": True,
                "wall_time": max(x["fpms"][0]["wall_time"] for x in rr),
                "rank_results": rr,
            }
        )
    total = 0.0
    for g in groups:
        total += g["wall_time"]
    for doc, res in zip(docs, results, strict=True):
        doc["timing"]["benchmark_elapsed_seconds"] = round(total + 30.0, 6)
        doc["timing"]["measured_iteration_seconds"] = total
        doc["results"] = res
        doc["iteration_groups"] = copy.deepcopy(groups)


def _common(
    files: dict[str, Any],
    docs: list[dict[str, Any]],
    plan: Mapping[str, Any],
    cell: Mapping[str, Any],
    manifest: Mapping[str, Any],
    attempt_id: str,
    merged: bool,
    backend_version: str = VLLM,
) -> dict[str, Any]:
    for r, doc in enumerate(docs):
        files[f"r{r}.json"] = doc
    files["provenance.json"] = {
        "schema_name": "fpmcore_collector_provenance",
        "schema_version": 1,
        "cell_id": cell["cell_id"],
        "plan_sha256": plan["sha256"],
        "attempt_id": attempt_id,
        "runtime": {"backend": "vllm", "backend_version": backend_version},
    }
    files["points.json"] = json.loads(canonical(manifest))
    if merged:
        files["merged.json"] = merge_ranks(docs, rank_files=[f"r{r}.json" for r in range(len(docs))])
    return files


def glm_cell(
    plan: Mapping[str, Any],
    cell: Mapping[str, Any],
    manifest: Mapping[str, Any],
    *,
    ranks: int = 1,
    run_id: str = "glm53flash-smoke-run-1",
    attempt_id: str = "attempt-1",
    merged: bool = False,
    producer_dir: str | Path = PRODUCER_DIR,
) -> dict[str, Any]:
    """The files of one GLM attempt (parsed JSON; sidecars as lists of byte lines with their newline).

    The ``producer`` record carries the digests of the producer files in ``producer_dir``.
    """
    points = points_of(manifest)
    grid = f"glm53flash-smoke-{canonical_digest(manifest)[:16]}"
    docs, results, files = [], [], {}
    for r in range(ranks):
        doc, res, lines, records = _rank_doc(points, r, ranks, glm=True, grid_digest=grid, run_id=run_id, samples=10)
        side = "repetitions.jsonl" if r == 0 else f"repetitions.r{r}.jsonl"
        doc.update(
            {
                "execution_mode": "native_graph_policy",
                "execution_identity": dict(cell["execution_identity"]),
                "observation_purpose": "fpm",
                "producer": glm_producer_record(
                    cell.get("model", GLM_MODEL), cell.get("model_revision", GLM_REVISION), producer_dir
                ),
                "serving_config": {
                    "enable_prefix_caching": True,
                    "mamba_cache_mode": "align",
                    "prefix_match_unit": None,
                    "hash_block_size": H,
                    "block_size": H,
                    "need_mamba_block_aligned_split": True,
                    "async_scheduling": False,
                    "mamba_prefill_checkpoint": dict(CHECKPOINT),
                },
                "input_provenance": {
                    "generator_version": 2,
                    "seed": 53,
                    "tokenizer_sha256": "0" * 64,
                    "tokenizer_revision": GLM_REVISION,
                },
                "kvwarm": {"method": "native_prefix_cache_real_seed"},
                "measurement_protocol": glm_protocol(),
                "warmup_evidence": {"status": "recorded", "records": records},
                "repetition_evidence": {
                    "path": side,
                    "sha256": hashlib.sha256(b"".join(lines)).hexdigest(),
                    "records": len(lines),
                },
            }
        )
        docs.append(doc)
        results.append(res)
        files[side] = lines
    _finish(docs, results, points)
    return _common(files, docs, plan, cell, manifest, attempt_id, merged)


def dsv41_cell(
    plan: Mapping[str, Any],
    cell: Mapping[str, Any],
    manifest: Mapping[str, Any],
    *,
    ranks: int = 1,
    samples: int = 3,
    run_id: str = "dsv41-run-1",
    attempt_id: str = "attempt-1",
) -> dict[str, Any]:
    """The files of one DeepSeek V4.1 eager attempt."""
    points = points_of(manifest)
    grid = f"dsv41-{canonical_digest(manifest)[:16]}"
    docs, results, files = [], [], {}
    protocol = {
        **glm_protocol(),
        "synthetic_content": "sharegpt",
        "content_seed": "0",
        "synthetic_pool_tag": "dsv41_sharegpt_v1",
    }
    del protocol["producer"]
    for r in range(ranks):
        doc, res, _lines, records = _rank_doc(
            points, r, ranks, glm=False, grid_digest=grid, run_id=run_id, samples=samples
        )
        doc.update(
            {
                "execution_mode": "eager",
                "execution_identity": dict(cell["execution_identity"]),
                "observation_purpose": "fpm",
                "input_provenance": {
                    "source": "tokenizer_text",
                    "text_sha256": "1" * 64,
                    "token_ids_sha256": "2" * 64,
                    "corpus_sha256": "3" * 64,
                    "tokenizer_revision": "v4.1-tokenizer-2026-10",
                    "num_tokens": 262144,
                    "num_unique_tokens": 48211,
                },
                "kvwarm": {"method": "kvwarm_real_kv"},
                "measurement_protocol": protocol,
                "warmup_evidence": {"status": "recorded", "records": records},
            }
        )
        docs.append(doc)
        results.append(res)
    _finish(docs, results, points)
    return _common(files, docs, plan, cell, manifest, attempt_id, False)


# -- plans ---------------------------------------------------------------------------


def glm_plan(
    manifest_sha256: str = FULL_DIGEST, smoke: Mapping[str, Any] = SMOKE_MANIFEST, planned: int = 577
) -> dict[str, Any]:
    """A GLM collection plan excerpt: two TP 4 cells (smoke, full) and the plan record of 04 G-25."""
    ident = {
        "model_config_sha256": GLM_CONFIG_SHA256,
        "execution_profile": "full",
        "engram_residency": "none",
        "input_modality": "text",
    }
    cells = [
        {
            "cell_id": f"fpm-glm53flash-tp4-{name}",
            "point_set": name,
            "workload_kind": "prefill_decode",
            "topology": {"tp": 4, "dp": 1, "pp": 1, "cp": 1, "moe_tp": 4, "moe_ep": 1},
            "model": GLM_MODEL,
            "model_revision": GLM_REVISION,
            "execution_identity": dict(ident),
        }
        for name in ("smoke", "full")
    ]
    plan: dict[str, Any] = {
        "schema_name": "fpmcore_collection_plan_excerpt",
        "schema_version": 1,
        "backend": "vllm",
        "model": GLM_MODEL,
        "model_revision": GLM_REVISION,
        "cells": cells,
        "options": {
            "benchmark_points": {
                "origin": "glm53flash_grid_v1",
                "checkpoint": dict(CHECKPOINT),
                "candidates": {"prefill": 496, "decode": 97},
                "dropped": {"align_split": 0, "token_budget": 16, "capacity": 0},
                "manifest_sha256": manifest_sha256,
                "smoke_manifest_sha256": canonical_digest(smoke),
                "planned_point_count": planned,
            }
        },
    }
    plan["sha256"] = plan_sha256(plan)
    return plan


DSV41_MANIFEST = {
    "schema_version": 3,
    "prefill": [{"batch_size": 1, "total_prefill_tokens": 512, "total_kv_read_tokens": 0, "rows": [[512, 0]]}],
    "decode": [{"batch_size": 4, "total_kv_read_tokens": 16384}],
}


def dsv41_plan() -> dict[str, Any]:
    """A DeepSeek V4.1 plan excerpt with one eager cell (Engram tables in HBM, TP-sharded)."""
    ident = {
        "model_config_sha256": DSV41_CONFIG_SHA256,
        "execution_profile": "full",
        "engram_residency": "hbm_tp_sharded",
        "input_modality": "text",
    }
    plan: dict[str, Any] = {
        "schema_name": "fpmcore_collection_plan_excerpt",
        "schema_version": 1,
        "backend": "vllm",
        "model": DSV41_MODEL,
        "cells": [
            {
                "cell_id": "fpm-dsv41-tp8-eager",
                "point_set": "staged",
                "workload_kind": "prefill_decode",
                "topology": {"tp": 8, "dp": 1, "pp": 1, "cp": 1, "moe_tp": 1, "moe_ep": 8},
                "model": DSV41_MODEL,
                "execution_identity": ident,
            }
        ],
    }
    plan["sha256"] = plan_sha256(plan)
    return plan


# -- writing ---------------------------------------------------------------------------


def serialize(files: Mapping[str, Any], *, indent: int | None = None, index: bool = True) -> dict[str, bytes]:
    """File bytes of an attempt: JSON files (``points.json`` canonical), line files joined, plus ``index.json``."""
    out: dict[str, bytes] = {}
    for name, value in files.items():
        if name.startswith("@"):
            continue
        if name.endswith(".jsonl"):
            out[name] = b"".join(value)
        elif name == "points.json":
            out[name] = canonical(value)
        elif indent is None:
            out[name] = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        else:
            out[name] = (json.dumps(value, indent=indent, ensure_ascii=False) + "\n").encode()
    return with_index(out) if index else out


def with_index(out: Mapping[str, bytes]) -> dict[str, bytes]:
    """The files of an attempt plus the artifact index that pins their bytes (05 §1)."""
    files = {n: b for n, b in out.items() if n != "index.json"}
    index = {"schema_version": 1, "files": {n: hashlib.sha256(b).hexdigest() for n, b in sorted(files.items())}}
    return {**files, "index.json": (json.dumps(index, indent=2) + "\n").encode()}


def write_attempt(directory: str | Path, files: Mapping[str, Any], *, indent: int | None = None) -> Path:
    """Write one attempt directory (with its artifact index); returns the directory."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for name, data in serialize(files, indent=indent).items():
        (d / name).write_bytes(data)
    return d


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def example(out: Path, producer_dir: str | Path = PRODUCER_DIR) -> None:
    """examples/artifacts: the GLM smoke run (05 §9) and a DeepSeek V4.1 eager run, each with its plan.

    The GLM run is written against the producer files of ``producer_dir``
    (they are read, never written).
    """
    producer_digests(producer_dir)  # refuse before writing anything
    gp = glm_plan()
    write_json(out / "glm53flash" / "plan.json", gp)
    smoke = next(c for c in gp["cells"] if c["point_set"] == "smoke")
    files = glm_cell(gp, smoke, SMOKE_MANIFEST, producer_dir=producer_dir)
    write_attempt(out / "glm53flash" / "run" / smoke["cell_id"], files, indent=1)
    dp = dsv41_plan()
    write_json(out / "dsv41" / "plan.json", dp)
    cell = dp["cells"][0]
    write_attempt(out / "dsv41" / "run" / cell["cell_id"], dsv41_cell(dp, cell, DSV41_MANIFEST), indent=1)


# -- negative cases (05 §9.3, and fpmcore's own) -----------------------------------------

SUFFIX = ": benchmark_id=2 rank=0: r0.json"
A32 = (
    "benchmark_measurement does not hold the producer's ten measured repetitions with their adjacent_upper_median "
    "estimate: "
)


def glm_example(
    ranks: int = 1, producer_dir: str | Path = PRODUCER_DIR
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(plan, cell, files)`` of the valid GLM smoke example (05 §9.1, §9.2)."""
    plan = glm_plan()
    cell = next(c for c in plan["cells"] if c["point_set"] == "smoke")
    return plan, cell, glm_cell(plan, cell, SMOKE_MANIFEST, ranks=ranks, producer_dir=producer_dir)


def ranks_of(files: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [files[f"r{r}.json"] for r in range(len([n for n in files if n.startswith("r") and n.endswith(".json")]))]


def fpm(files: Mapping[str, Any], bid: int = 2, rank: int = 0) -> dict[str, Any]:
    """The retained FPM of a row (results order = benchmark ids)."""
    return files[f"r{rank}.json"]["results"][bid - 1]["fpms"][0]


def bm(files: Mapping[str, Any], bid: int = 2, rank: int = 0) -> dict[str, Any]:
    return fpm(files, bid, rank)["benchmark_measurement"]


def raw(files: Mapping[str, Any], i: int, bid: int = 2, rank: int = 0) -> dict[str, Any]:
    return bm(files, bid, rank)["raw_fpms"][i]


def sync(files: dict[str, Any], bid: int = 2) -> None:
    """Apply a row change to its iteration group on every rank and move the timing totals (05 §9.3)."""
    docs = ranks_of(files)
    for doc in docs:
        g = doc["iteration_groups"][bid - 1]
        g["point"] = copy.deepcopy(docs[0]["results"][bid - 1]["point"])
        for r, other in enumerate(docs):
            g["rank_results"][r]["fpms"] = [copy.deepcopy(other["results"][bid - 1]["fpms"][0])]
        g["wall_time"] = max(x["fpms"][0]["wall_time"] for x in g["rank_results"])
    total = 0.0
    for g in docs[0]["iteration_groups"]:
        total += g["wall_time"]
    for doc in docs:
        doc["timing"]["measured_iteration_seconds"] = total
        doc["timing"]["benchmark_elapsed_seconds"] = max(doc["timing"]["benchmark_elapsed_seconds"], total)


def reseal_sidecar(files: dict[str, Any], rank: int = 0) -> None:
    """Update ``repetition_evidence`` (file digest and record count) after a sidecar edit."""
    doc = files[f"r{rank}.json"]
    lines = files[doc["repetition_evidence"]["path"]]
    doc["repetition_evidence"]["sha256"] = hashlib.sha256(b"".join(lines)).hexdigest()
    doc["repetition_evidence"]["records"] = sum(1 for x in lines if x.endswith(b"\n"))


def edit_line(files: dict[str, Any], k: int, fn: Any, rank: int = 0) -> None:
    """Edit sidecar line ``k`` (parsed), keep it canonical, and rebind its row and the file digest."""
    doc = files[f"r{rank}.json"]
    lines = files[doc["repetition_evidence"]["path"]]
    obj = json.loads(lines[k])
    fn(obj)
    body = canonical(obj)
    lines[k] = body + b"\n"
    doc["results"][k]["repetition_evidence_sha256"] = hashlib.sha256(body).hexdigest()
    reseal_sidecar(files, rank)


def retained_from_raw(files: dict[str, Any], bid: int = 2, indices: Sequence[int] | None = None) -> None:
    m = bm(files, bid)
    idx = m["estimate"]["raw_sample_indices"] if indices is None else list(indices)
    m["estimate"]["raw_sample_indices"] = idx
    fpm(files, bid)["wall_time"] = upper_median([m["raw_fpms"][i]["wall_time"] for i in idx])


class Case:
    """One negative case: ``build()`` returns ``(plan, cell, files, message)``; ``rule`` must refuse it."""

    def __init__(self, case_id: str, rule: str, change: str, fn: Any, ranks: int = 1) -> None:
        self.id, self.rule, self.change, self._fn, self.ranks = case_id, rule, change, fn, ranks

    def build(
        self, producer_dir: str | Path = PRODUCER_DIR
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], str]:
        """The changed example, built against the producer files of ``producer_dir``."""
        plan, cell, files = glm_example(self.ranks, producer_dir)
        wants_dir = "producer_dir" in inspect.signature(self._fn).parameters
        out = self._fn(plan, cell, files, producer_dir=producer_dir) if wants_dir else self._fn(plan, cell, files)
        if isinstance(out, str):
            return plan, cell, files, out
        return out  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return self.id


def _other_cell(
    plan: dict[str, Any], cell: dict[str, Any], files: dict[str, Any], residency: str, model_sha: str = ""
) -> dict[str, Any]:
    new = copy.deepcopy(cell)
    new["cell_id"] = f"fpm-other-{residency}"
    new["execution_identity"]["engram_residency"] = residency
    if model_sha is not None:
        new["execution_identity"]["model_config_sha256"] = model_sha or new["execution_identity"]["model_config_sha256"]
    for doc in ranks_of(files):
        doc["execution_identity"] = dict(new["execution_identity"])
    files["provenance.json"]["cell_id"] = new["cell_id"]
    return new


def _n1(plan, cell, files):
    bm(files)["estimate"]["method"] = "repetition_median"
    sync(files)
    return A32 + "method=repetition_median, raw_samples=10, expected_internal_samples=10" + SUFFIX


def _n2(plan, cell, files):
    m = bm(files)
    m["raw_fpms"].pop()
    m["expected_internal_samples"] = 9
    retained_from_raw(files, indices=range(1, 9))
    sync(files)
    return A32 + "method=adjacent_upper_median, raw_samples=9, expected_internal_samples=9" + SUFFIX


def _n3(plan, cell, files):
    m = bm(files)
    extra = copy.deepcopy(m["raw_fpms"][-1])
    extra["benchmark_sample"]["sample_index"] = 10
    extra["benchmark_sample"]["forward_index"] += 1
    m["raw_fpms"].append(extra)
    m["expected_internal_samples"] = 11
    retained_from_raw(files, indices=range(1, 11))
    sync(files)
    return A32 + "method=adjacent_upper_median, raw_samples=11, expected_internal_samples=11" + SUFFIX


def _n4(plan, cell, files):
    bm(files)["expected_internal_samples"] = 12
    sync(files)
    return A32 + "method=adjacent_upper_median, raw_samples=10, expected_internal_samples=12" + SUFFIX


def _n5(plan, cell, files):
    bm(files)["estimate"] = {"method": "last_step", "raw_sample_indices": [9]}
    fpm(files)["wall_time"] = 0.0352
    sync(files)
    return A32 + "method=last_step, raw_samples=10, expected_internal_samples=10" + SUFFIX


def _n6(plan, cell, files):
    fpm(files)["wall_time"] = 0.0352
    sync(files)
    return "benchmark_measurement reduction disagrees with retained timing: retained=0.0352, reduced=0.0348" + SUFFIX


def _n7(plan, cell, files):
    raw(files, 3)["benchmark_sample"]["sample_index"] = 4
    sync(files)
    return (
        "raw sample 3 has an invalid sample/forward index: sample_index=4, forward_index=26, previous forward_index=25"
        + SUFFIX
    )


def _n8(plan, cell, files):
    raw(files, 5)["benchmark_sample"]["forward_index"] = 27
    sync(files)
    return (
        "raw sample 5 has an invalid sample/forward index: sample_index=5, forward_index=27, previous forward_index=27"
        + SUFFIX
    )


def _n9(plan, cell, files):
    raw(files, 2)["benchmark_sample"]["timing"]["end_monotonic"] = 5123.64
    sync(files)
    return "raw sample 2 contradicts its timing interval: start=5123.6, end=5123.64, wall_time=0.0347" + SUFFIX


def _n10(plan, cell, files):
    raw(files, 0)["benchmark_sample"]["timing"]["start_monotonic"] = None
    sync(files)
    return "benchmark_sample.timing.start_monotonic of raw sample 0 expected a number, found null" + SUFFIX


def _n11(plan, cell, files):
    raw(files, 7)["benchmark_sample"]["cudagraph"] = {
        "status": "unavailable",
        "runtime_mode": None,
        "num_unpadded_tokens": None,
        "num_padded_tokens": None,
        "num_paddings": None,
    }
    sync(files)
    return "benchmark_sample.cudagraph.status of raw sample 7 expected observed, found unavailable" + SUFFIX


def _n12(plan, cell, files):
    files["r0.json"]["producer"]["vllm_package_version"] = "0.33.1"
    files["provenance.json"]["runtime"]["backend_version"] = "0.33.1"
    return (
        "native glm-5.3-flash result lacks valid producer.vllm_package_version: expected 0.33.0, found 0.33.1: r0.json"
    )


def _n13(plan, cell, files):
    files["provenance.json"]["runtime"]["backend_version"] = "0.33.1"
    return (
        "native glm-5.3-flash producer.vllm_package_version differs from the collector provenance runtime: "
        "expected 0.33.1, found 0.33.0: r0.json"
    )


def _n14(plan, cell, files, producer_dir=PRODUCER_DIR):
    # the campaign was launched with a locally edited overlay: the shipped file plus one comment line
    shipped = files["r0.json"]["producer"]["overlay_sha256"]
    edited = (Path(producer_dir) / "glm53flash_prefix_scheduler.py").read_bytes() + b"# locally edited\n"
    d = hashlib.sha256(edited).hexdigest()
    files["r0.json"]["producer"]["overlay_sha256"] = d
    return f"native glm-5.3-flash result lacks valid producer.overlay_sha256: expected {shipped}, found {d}: r0.json"


def _n15(plan, cell, files):
    del files["r1.json"]["serving_config"]["mamba_prefill_checkpoint"]
    return (
        'native ranks disagree on serving_config.mamba_prefill_checkpoint: rank 0={"alignment":16,"blocks":true}, '
        "rank 1=absent: r1.json"
    )


def _n16(plan, cell, files):
    del files["r0.json"]["serving_config"]["mamba_prefill_checkpoint"]
    return (
        "native ranks disagree on serving_config.mamba_prefill_checkpoint: rank 0=absent, rank "
        '1={"alignment":16,"blocks":true}: r1.json'
    )


def _n17(plan, cell, files):
    files["r0.json"]["execution_mode"] = "eager"
    return "native execution identity cell expects execution mode native_graph_policy, found eager: r0.json"


def _n18(plan, cell, files):
    new = _other_cell(plan, cell, files, "hbm_tp_sharded")
    return (
        plan,
        new,
        files,
        "native execution identity cell expects execution mode eager, found native_graph_policy: r0.json",
    )


def _n19(plan, cell, files):
    new = _other_cell(plan, cell, files, "host_offload")
    return plan, new, files, "native execution identity cell has no audited producer contract: host_offload: r0.json"


def _n20(plan, cell, files):
    files["r0.json"]["measurement_protocol"]["producer"]["reduction"] = "median_of_ten"
    return (
        "measurement_protocol.producer.reduction expected upper_median_after_first_repetition, found "
        "median_of_ten: r0.json"
    )


def _n21(plan, cell, files):
    files["r0.json"]["measurement_protocol"]["synthetic_content"] = "random"
    return "measurement_protocol.synthetic_content expected seeded_tokens, found random: r0.json"


def _n22(plan, cell, files):
    doc = files["r0.json"]
    doc["warmup_evidence"] = {"status": "unavailable", "records": []}
    for k in range(len(doc["results"])):
        bm(files, k + 1)["preparation"]["warmup_records_before"] = None
        sync(files, k + 1)
    return "warmup_evidence.status expected recorded, found unavailable: rank 0: r0.json"


def _n23(plan, cell, files):
    new = copy.deepcopy(cell)
    new["cell_id"] = "fpm-legacy-cell"
    del new["execution_identity"]
    files["provenance.json"]["cell_id"] = new["cell_id"]
    return (
        plan,
        new,
        files,
        "measurement_protocol.producer belongs to the glm-5.3-flash producer contract, found in a cell with "
        "contract general: r0.json",
    )


def _n24(plan, cell, files):
    x = hashlib.sha256(b"another repetition line").hexdigest()
    files["r0.json"]["results"][1]["repetition_evidence_sha256"] = x
    return (
        "repetition_evidence_sha256 of benchmark_id=2 rank=0 matches no line of the repetition evidence sidecar: "
        f"found {x}: r0.json"
    )


def _n25(plan, cell, files):
    files["r0.json"]["repetition_evidence"]["records"] = True
    return "repetition_evidence.records must be an integer, found true: r0.json"


def _n26(plan, cell, files):
    files["r0.json"]["repetition_evidence"]["records"] = 4
    return "repetition evidence sidecar holds 5 lines, artifact records 4: r0.json"


def _n27(plan, cell, files):
    def change(obj: dict[str, Any]) -> None:
        next(r for r in obj["repetitions"] if r.get("raw_sample_index") == 3)["wall_time"] = 0.035

    edit_line(files, 1, change)
    return (
        "repetition evidence line for benchmark_id=2 rank=0 contradicts its row: measured wall_time of raw sample "
        "3 expected 0.0349, found 0.035: r0.json"
    )


def _n28(plan, cell, files):
    raw(files, 4)["scheduled_requests"]["sum_prefill_kv_tokens"] = 0
    sync(files)
    return "raw sample 4 workload differs from its point: sum_prefill_kv_tokens expected 2176, found 0" + SUFFIX


def _n29(plan, cell, files):
    raw(files, 6)["scheduled_requests"].update(num_decode_requests=1, sum_decode_kv_tokens=4096)
    sync(files)
    return "raw sample 6 workload differs from its point: num_decode_requests expected 0, found 1" + SUFFIX


def _n30(plan, cell, files):
    files["r0.json"]["results"][1]["kv_seed_regime"] = "not_applicable"
    bm(files)["preparation"]["kv_seed_regime"] = "not_applicable"
    sync(files)
    return "kv_seed_regime does not follow its point: expected real_kv, found not_applicable" + SUFFIX


def _n31(plan, cell, files):
    row = files["r0.json"]["results"][1]
    row["fpms"] = [row["fpms"][0], copy.deepcopy(row["fpms"][0])]
    return "benchmark_id=2: the native save did not keep one fpm of one rank: rank 0 holds 2 fpms: r0.json"


def _n32(plan, cell, files):
    k = point_key(files["r0.json"]["results"][2]["point"])
    bm(files)["point_key"] = k
    sync(files)
    return (
        "benchmark_measurement has missing or inconsistent rank/point identity: point_key expected "
        f"d60ecb7532ce754610cb0521e84f5d0a1c9066f7876cf17a31462ed0d5c629f4, found {k}" + SUFFIX
    )


def _n33(plan, cell, files):
    bm(files)["preparation"]["completed_points_before"] = 2
    sync(files)
    return (
        "benchmark_measurement has inconsistent grid/order/kv preparation: completed_points_before expected 1, found 2"
        + SUFFIX
    )


def _n34(plan, cell, files):
    bm(files)["expected_internal_samples"] = 10.0
    sync(files)
    return "results[1].fpms[0].benchmark_measurement.expected_internal_samples must be an integer, found 10.0: r0.json"


def _n35(plan, cell, files):
    raw(files, 0)["counter_id"] = 3
    sync(files)
    return "raw sample 0 has a different point/rank identity: counter_id=3, dp_rank=0, worker_id=dp0-worker" + SUFFIX


def _n36(plan, cell, files):
    doc = files["r0.json"]
    row = doc["results"][1]
    row["point"].update(total_kv_read_tokens=4352, rows=[[64, 4352]])
    m = bm(files)
    m["point_key"] = point_key(row["point"])
    for f in [fpm(files)] + m["raw_fpms"]:
        f["scheduled_requests"]["sum_prefill_kv_tokens"] = 4352
    sync(files)
    c = canonical_digest(
        {
            **SMOKE_MANIFEST,
            "prefill": [
                SMOKE_MANIFEST["prefill"][0],
                {"batch_size": 1, "total_prefill_tokens": 64, "total_kv_read_tokens": 4352, "rows": [[64, 4352]]},
                SMOKE_MANIFEST["prefill"][2],
            ],
        }
    )
    return (
        f"native points differ from the staged plan list: expected manifest {canonical_digest(SMOKE_MANIFEST)}, "
        f"found {c}: r0.json"
    )


def _n37(plan, cell, files):
    del files["r0.json"]["producer"]
    return (
        "native glm-5.3-flash result lacks valid producer.name: expected glm53flash_prefix_scheduler, found "
        "absent: r0.json"
    )


def _n38(plan, cell, files):
    files["r0.json"]["serving_config"]["mamba_prefill_checkpoint"] = {"alignment": None, "blocks": False}
    return (
        "serving_config.mamba_prefill_checkpoint differs from the frozen plan: expected "
        '{"alignment":16,"blocks":true}, found {"alignment":null,"blocks":false}: r0.json'
    )


def _n39(plan, cell, files):
    doc = files["r0.json"]
    doc.update(status="partial", valid=False, stop_reason="timeout")
    doc["coverage"]["completed_points"] = 4
    return "native rank artifact is not complete: status=partial, stop_reason=timeout: r0.json"


def _n40(plan, cell, files):
    s = raw(files, 0)
    s["wall_time"] = 0.0
    s["benchmark_sample"]["timing"]["end_monotonic"] = s["benchmark_sample"]["timing"]["start_monotonic"]
    sync(files)
    return "raw sample 0 has a non-positive or non-finite wall_time: 0.0" + SUFFIX


# fpmcore's own cases


def _x_swapped_digests(plan, cell, files):
    rows = files["r0.json"]["results"]
    rows[0]["repetition_evidence_sha256"], rows[1]["repetition_evidence_sha256"] = (
        rows[1]["repetition_evidence_sha256"],
        rows[0]["repetition_evidence_sha256"],
    )
    return (
        "repetition evidence line for benchmark_id=1 rank=0 contradicts its row: benchmark_id expected 1, found "
        "2: r0.json"
    )


def _x_bool_forward_index(plan, cell, files):
    raw(files, 3)["benchmark_sample"]["forward_index"] = True
    sync(files)
    return (
        "results[1].fpms[0].benchmark_measurement.raw_fpms[3].benchmark_sample.forward_index must be an integer, "
        "found true: r0.json"
    )


def _x_bool_batch_size(plan, cell, files):
    files["r0.json"]["iteration_groups"][3]["point"]["batch_size"] = True
    return "iteration_groups[3].point.batch_size must be an integer, found true: r0.json"


def _x_bool_sidecar(plan, cell, files):
    edit_line(files, 1, lambda obj: obj["repetitions"][2].update(index=True))
    return "lines[1].repetitions[2].index must be an integer, found true: repetitions.jsonl"


def _x_other_workload(plan, cell, files):
    raw(files, 2)["scheduled_requests"] = copy.deepcopy(raw(files, 2, bid=1)["scheduled_requests"])
    sync(files)
    return "raw sample 2 workload differs from its point: sum_prefill_kv_tokens expected 2176, found 0" + SUFFIX


def _x_retained_workload(plan, cell, files):
    fpm(files)["scheduled_requests"]["sum_prefill_tokens"] = 65
    sync(files)
    return "retained fpm workload differs from its point: sum_prefill_tokens expected 64, found 65" + SUFFIX


def _x_unbound_line(plan, cell, files):
    lines = files["repetitions.jsonl"]
    extra = json.loads(lines[1])
    extra["benchmark_id"] = 9
    body = canonical(extra)
    lines.append(body + b"\n")
    reseal_sidecar(files)
    return f"repetition evidence sidecar line 6 is bound to no row: sha256 {hashlib.sha256(body).hexdigest()}: r0.json"


def _x_no_final_newline(plan, cell, files):
    lines = files["repetitions.jsonl"]
    lines[-1] = lines[-1].rstrip(b"\n")
    reseal_sidecar(files)
    files["r0.json"]["repetition_evidence"]["records"] = 5
    return "repetition evidence sidecar must end every line with a newline: r0.json"


def _x_sidecar_digest(plan, cell, files):
    want = files["r0.json"]["repetition_evidence"]["sha256"]
    files["repetitions.jsonl"][0] = files["repetitions.jsonl"][0].replace(b'"fpm_count":1', b'"fpm_count":2', 1)
    found = hashlib.sha256(b"".join(files["repetitions.jsonl"])).hexdigest()
    return f"repetition evidence sidecar digest differs: expected {want}, found {found}: r0.json"


def _x_moved_median_to_slowest(plan, cell, files):
    fpm(files)["wall_time"] = 0.036
    sync(files)
    return "benchmark_measurement reduction disagrees with retained timing: retained=0.036, reduced=0.0348" + SUFFIX


def _x_wrong_indices(plan, cell, files):
    bm(files)["estimate"]["raw_sample_indices"] = list(range(0, 9))
    sync(files)
    return (
        "benchmark_measurement has inconsistent raw sample indices: expected [1,2,3,4,5,6,7,8,9], found "
        "[0,1,2,3,4,5,6,7,8]" + SUFFIX
    )


def _x_warmup_overlap(plan, cell, files):
    bm(files)["preparation"]["warmup_records_before"] = 13
    sync(files)
    return "warmup reference overlaps measurement: record 12 ends at forward 34 after the first raw sample 23" + SUFFIX


def _x_prompt_hash(plan, cell, files):
    reqs = [{"slot": 0, "num_tokens": 2240, "sha256": "a" * 64}]
    bm(files)["prompts"] = {"status": "recorded", "sha256": "b" * 64, "requests": reqs}
    sync(files)
    return (
        f"recorded prompt evidence aggregate hash disagrees with requests: expected {canonical_digest(reqs)}, found "
        f"{'b' * 64}" + SUFFIX
    )


def _x_group_wall(plan, cell, files):
    files["r0.json"]["iteration_groups"][1]["wall_time"] = 0.05
    return "benchmark_id=2: iteration wall time 0.05 differs from the slowest rank 0.0348: r0.json"


def _x_ids(plan, cell, files):
    files["r0.json"]["iteration_groups"][1]["benchmark_id"] = 3
    return "native iteration groups are not a contiguous 1-based sequence: found [1,3,3,4,5]: r0.json"


def _x_coverage(plan, cell, files):
    files["r0.json"]["coverage"]["expected_points"] = 6
    return (
        "native coverage is inconsistent: expected_points=6, completed_points=5, skipped_points=0, results=5, "
        "iteration_groups=5: r0.json"
    )


def _x_schema(plan, cell, files):
    files["r0.json"]["schema_version"] = 3
    return "unsupported native rank artifact: schema_version=3, artifact_type=rank: r0.json"


def _x_missing_rank(plan, cell, files):
    del files["r1.json"]
    return "native rank artifacts do not cover dp ranks 0..1: found [0]: ."


def _x_plan_hash(plan, cell, files):
    files["provenance.json"]["plan_sha256"] = "c" * 64
    return (
        f"collector provenance differs from the frozen cell: plan_sha256 expected {plan['sha256']}, found "
        f"{'c' * 64}: provenance.json"
    )


def _x_identity(plan, cell, files):
    files["r0.json"]["execution_identity"]["model_config_sha256"] = "d" * 64
    want = cell["execution_identity"]["model_config_sha256"]
    return (
        f"native execution identity differs from the frozen cell: model_config_sha256 expected {want}, found "
        f"{'d' * 64}: r0.json"
    )


def _x_content_identity(plan, cell, files):
    files["r0.json"]["measurement_protocol"]["content_identity"] = "coordinate_rank_slot_v2"
    return (
        "measurement_protocol.content_identity expected coordinate_rank_slot_v1, found coordinate_rank_slot_v2: r0.json"
    )


def _x_execution_evidence(plan, cell, files):
    files["r0.json"]["measurement_protocol"]["execution_evidence"]["timing_clock"] = "wall"
    ev = files["r0.json"]["measurement_protocol"]["execution_evidence"]
    return (
        "measurement_protocol.execution_evidence expected "
        f"{json.dumps(EXECUTION_EVIDENCE, sort_keys=True, separators=(',', ':'))}, found "
        f"{json.dumps(ev, sort_keys=True, separators=(',', ':'))}: r0.json"
    )


def _x_warmup_ledger(plan, cell, files):
    files["r0.json"]["warmup_evidence"]["records"][6]["observed_forward_count"] = 1
    return (
        "warmup_evidence is invalid: records[6] forward range [16, 18) holds 2 forwards, observed_forward_count "
        "1: rank 0: r0.json"
    )


def _x_model_revision(plan, cell, files):
    files["r0.json"]["producer"]["model_revision"] = "f" * 40
    return (
        f"native glm-5.3-flash result lacks valid producer.model_revision: expected {GLM_REVISION}, found "
        f"{'f' * 40}: r0.json"
    )


def _x_protocol_extra(plan, cell, files):
    files["r0.json"]["measurement_protocol"]["producer"]["reduction_version"] = 2
    return "measurement_protocol.producer.reduction_version expected absent, found 2: r0.json"


def _x_protocol_disagree(plan, cell, files):
    del files["r1.json"]["measurement_protocol"]
    return "native ranks disagree on measurement_protocol: rank 1: r1.json"


def _x_merged(plan, cell, files):
    docs = ranks_of(files)
    files["merged.json"] = merge_ranks(docs, rank_files=["r0.json", "r1.json"])
    files["merged.json"]["coverage"]["completed_points"] = 5
    return "native merged artifact differs from the merge of its rank artifacts: coverage.completed_points: merged.json"


def _x_engine(plan, cell, files):
    for r, doc in enumerate(ranks_of(files)):
        doc["engine"] = {
            "vllm_version": "0.33.0",
            "parallel": {"tensor_parallel_size": 4, "data_parallel_rank": r},
            "attention": {"backend": "FLASHMLA", "backend_resolved": f"x{r}"},
        }
    files["r1.json"]["engine"]["attention"]["backend"] = "TRITON_MLA"
    return "native ranks disagree on engine provenance: field=engine.attention.backend, rank 0 vs rank 1: r1.json"


CASES: tuple[Case, ...] = (
    Case("N1", "A-32", "estimate.method = repetition_median", _n1),
    Case("N2", "A-32", "nine raw samples", _n2),
    Case("N3", "A-32", "eleven raw samples", _n3),
    Case("N4", "A-32", "expected_internal_samples = 12", _n4),
    Case("N5", "A-32", "last_step estimate", _n5),
    Case("N6", "A-34", "moved retained median", _n6),
    Case("N7", "A-33", "sample_index out of position", _n7),
    Case("N8", "A-33", "repeated forward_index", _n8),
    Case("N9", "A-33", "timing interval contradicts wall_time", _n9),
    Case("N10", "A-36", "start_monotonic null", _n10),
    Case("N11", "A-36", "cudagraph unavailable", _n11),
    Case("N12", "A-21", "vLLM 0.33.1 in the producer record", _n12),
    Case("N13", "A-22", "collector runtime 0.33.1", _n13),
    Case("N14", "A-21", "edited producer overlay", _n14),
    Case("N15", "A-26", "rank 1 lacks the checkpoint record", _n15, ranks=2),
    Case("N16", "A-26", "rank 0 lacks the checkpoint record", _n16, ranks=2),
    Case("N17", "A-16", "GLM cell with an eager artifact", _n17),
    Case("N18", "A-16", "V4.1 cell with a native_graph_policy artifact", _n18),
    Case("N19", "A-14", "unknown Engram residency", _n19),
    Case("N20", "A-23", "protocol producer reduction", _n20),
    Case("N21", "A-23", "synthetic_content random", _n21),
    Case("N22", "A-25", "warm-up evidence unavailable", _n22),
    Case("N23", "A-17", "GLM protocol producer in a general cell", _n23),
    Case("N24", "A-38", "row digest of no sidecar line", _n24),
    Case("N25", "A-2", "repetition_evidence.records = true", _n25),
    Case("N26", "A-28", "sidecar record count", _n26),
    Case("N27", "A-39", "sidecar wall time differs from the raw sample", _n27),
    Case("N28", "A-40", "raw sample without its cached prefix", _n28),
    Case("N29", "A-40", "raw sample with a decode request", _n29),
    Case("N30", "A-37", "cached prefill labelled not_applicable", _n30),
    Case("N31", "A-8", "retained FPM kept twice", _n31),
    Case("N32", "A-29", "point_key of another point", _n32),
    Case("N33", "A-30", "completed_points_before", _n33),
    Case("N34", "A-2", "expected_internal_samples = 10.0", _n34),
    Case("N35", "A-33", "raw sample of another counter", _n35),
    Case("N36", "A-10", "points differ from the staged list", _n36),
    Case("N37", "A-21", "producer record absent", _n37),
    Case("N38", "A-27", "checkpoint differs from the plan", _n38),
    Case("N39", "A-4", "partial artifact", _n39),
    Case("N40", "A-33", "zero raw wall time", _n40),
    Case("X1", "A-39", "swapped row digests", _x_swapped_digests),
    Case("X2", "A-2", "true as forward_index", _x_bool_forward_index),
    Case("X3", "A-2", "true as a group point's batch_size", _x_bool_batch_size),
    Case("X4", "A-2", "true as a sidecar index", _x_bool_sidecar),
    Case("X5", "A-40", "raw sample of another workload", _x_other_workload),
    Case("X6", "A-40", "retained FPM of another workload", _x_retained_workload),
    Case("X7", "A-38", "sidecar line bound to no row", _x_unbound_line),
    Case("X8", "A-28", "sidecar without final newline", _x_no_final_newline),
    Case("X9", "A-28", "sidecar edited after the digest", _x_sidecar_digest),
    Case("X10", "A-34", "retained moved to the slowest repetition", _x_moved_median_to_slowest),
    Case("X11", "A-34", "raw sample indices include the first", _x_wrong_indices),
    Case("X12", "A-35", "warm-up reference overlaps measurement", _x_warmup_overlap),
    Case("X13", "A-31", "prompt aggregate hash", _x_prompt_hash),
    Case("X14", "A-9", "group wall time moved alone", _x_group_wall),
    Case("X15", "A-7", "benchmark ids not contiguous", _x_ids),
    Case("X16", "A-5", "coverage", _x_coverage),
    Case("X17", "A-1", "schema_version 3", _x_schema),
    Case("X18", "A-3", "rank artifact missing", _x_missing_rank, ranks=2),
    Case("X19", "A-13", "provenance plan hash", _x_plan_hash),
    Case("X20", "A-15", "artifact identity differs", _x_identity),
    Case("X21", "A-19", "content identity", _x_content_identity),
    Case("X22", "A-20", "execution evidence object", _x_execution_evidence),
    Case("X23", "A-24", "warm-up ledger count", _x_warmup_ledger),
    Case("X24", "A-21", "model revision of another checkpoint", _x_model_revision),
    Case("X25", "A-23", "extra protocol producer key", _x_protocol_extra),
    Case("X26", "A-18", "rank 1 without protocol", _x_protocol_disagree, ranks=2),
    Case("X27", "A-12", "merged artifact differs", _x_merged, ranks=2),
    Case("X28", "A-11", "engine blocks differ", _x_engine, ranks=2),
)


def write_negatives(out: Path, producer_dir: str | Path = PRODUCER_DIR) -> None:
    """One attempt directory per case under ``out/<id>/`` (plan and cell beside it)."""
    for case in CASES:
        plan, cell, files, message = case.build(producer_dir)
        d = out / case.id
        write_attempt(d / "attempt", files, indent=1)
        write_json(d / "plan.json", plan)
        write_json(d / "expected.json", {"cell": cell, "rule": case.rule, "message": message, "change": case.change})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("example", help="write the example runs")
    ex.add_argument("out", nargs="?", default=str(ROOT / "examples" / "artifacts"))
    neg = sub.add_parser("negatives", help="write every negative case (05 §9.3 and fpmcore's own)")
    neg.add_argument("out")
    c = sub.add_parser("cell", help="write one attempt for a cell of a plan")
    c.add_argument("--plan", required=True)
    c.add_argument("--cell", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--ranks", type=int, default=1)
    c.add_argument("--merged", action="store_true")
    for p in (ex, neg, c):
        p.add_argument(
            "--producer-dir",
            default=str(PRODUCER_DIR),
            help="the producer files the GLM producer record is written against (default: %(default)s)",
        )
    args = parser.parse_args(argv)
    if args.cmd == "example":
        example(Path(args.out), args.producer_dir)
        return 0
    if args.cmd == "negatives":
        write_negatives(Path(args.out), args.producer_dir)
        return 0
    plan = json.loads(Path(args.plan).read_text())
    cell = next((x for x in plan.get("cells", []) if x.get("cell_id") == args.cell), None)
    if cell is None:
        print(f"no cell {args.cell} in {args.plan}", file=sys.stderr)
        return 2
    bp = plan.get("options", {}).get("benchmark_points", {})
    manifest = SMOKE_MANIFEST if cell.get("point_set") == "smoke" else bp.get("manifest")
    if manifest is None:
        print("the plan stores no manifest for this cell", file=sys.stderr)
        return 2
    residency = cell.get("execution_identity", {}).get("engram_residency")
    maker = dsv41_cell if residency == "hbm_tp_sharded" else glm_cell
    kwargs = {"merged": args.merged, "producer_dir": args.producer_dir} if maker is glm_cell else {}
    write_attempt(args.out, maker(plan, cell, manifest, ranks=args.ranks, **kwargs), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

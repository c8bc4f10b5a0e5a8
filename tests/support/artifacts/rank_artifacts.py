"""A rank artifact of the producers' shape (05 §1-§7): its rows, the repetition evidence sidecar lines, the
warm-up records, and the iteration groups that synchronize the ranks of an attempt.

The GLM producer's native protocol (``native``) splits the first repetition of a cached prefill at the
junction, warms up five times and binds every row to a sidecar line; the eager producer warms up once.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from fpmcore.validate.measured_values import point_key, upper_median
from tests.support.artifacts.example_campaign import PATTERN, T0, H, canonical


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


def rank_doc(
    points: Sequence[Mapping[str, Any]],
    rank: int,
    size: int,
    *,
    native: bool,
    grid_digest: str,
    run_id: str,
    samples: int,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[bytes], list[dict[str, Any]]]:
    """One rank artifact (without results and groups), its rows, its sidecar lines and its warm-up records."""
    forward = 0
    records: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    lines: list[bytes] = []
    for k, point in enumerate(points):
        reps: list[dict[str, Any]] = []
        prefix = point["point_type"] == "decode" or point["total_kv_read_tokens"] > 0
        if native and prefix:
            records.append(_warmup("real_prefix_seed", "completed", forward, forward + 1, k))
            forward += 1
            if point["point_type"] == "prefill":  # the first repetition is split at the junction (05 §7.1)
                records.append(_warmup("real_prefix_shape", "failed", forward, forward + 2, k, "split_into_2_forwards"))
                reps.append({"fpm_count": 2, "index": 0, "reason": "split_into_2_forwards", "role": "rejected"})
                forward += 2
        for _ in range(5 if native else 1):
            records.append(
                _warmup("real_prefix_shape" if native else "eager_shape", "completed", forward, forward + 1, k)
            )
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
                "cudagraph": _graph(point, eager=not native),
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
        if native:
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


def add_groups(
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
                "wall_time": slowest_wall(rr),
                "rank_results": rr,
            }
        )
    total = measured_seconds(groups)
    for doc, res in zip(docs, results, strict=True):
        doc["timing"]["benchmark_elapsed_seconds"] = round(total + 30.0, 6)
        doc["timing"]["measured_iteration_seconds"] = total
        doc["results"] = res
        doc["iteration_groups"] = copy.deepcopy(groups)


def slowest_wall(rank_results: Sequence[Mapping[str, Any]]) -> float:
    """The wall time of an iteration group: its slowest rank's retained FPM (05 §9.3)."""
    wall: float = max(x["fpms"][0]["wall_time"] for x in rank_results)
    return wall


def measured_seconds(groups: Sequence[Mapping[str, Any]]) -> float:
    """``timing.measured_iteration_seconds``: the wall times of the iteration groups, summed in order."""
    total = 0.0
    for g in groups:
        total += g["wall_time"]
    return total


def sidecar_evidence(path: str, lines: Sequence[bytes]) -> dict[str, Any]:
    """``repetition_evidence`` of a rank artifact: the sidecar's name, the digest of its bytes, its lines."""
    return {
        "path": path,
        "sha256": hashlib.sha256(b"".join(lines)).hexdigest(),
        "records": sum(1 for x in lines if x.endswith(b"\n")),
    }

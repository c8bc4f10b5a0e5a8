"""The files of one attempt of a plan cell in a producer's shape: the rank artifacts ``r<k>.json``, the
repetition evidence sidecars (GLM), the collector provenance, the staged point manifest and, when asked,
the merged artifact (parsed JSON; a sidecar is a list of byte lines with their newline)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fpmcore.validate.measured_values import canonical_digest
from fpmcore.validate.structure import merge_ranks
from tests.support.artifacts.example_campaign import (
    CHECKPOINT,
    GLM_MODEL,
    GLM_REVISION,
    PRODUCER_DIR,
    SMOKE_MANIFEST,
    VLLM,
    H,
    canonical,
    dsv41_protocol,
    glm_producer_record,
    glm_protocol,
)
from tests.support.artifacts.plans import glm_plan
from tests.support.artifacts.rank_artifacts import add_groups, points_of, rank_doc, sidecar_evidence

#: The execution mode of the GLM producer, whose protocol binds every row to a repetition evidence sidecar line.
NATIVE = "native_graph_policy"


def _attempt(
    plan: Mapping[str, Any],
    cell: Mapping[str, Any],
    manifest: Mapping[str, Any],
    *,
    mode: str,
    grid_prefix: str,
    ranks: int,
    samples: int,
    run_id: str,
    attempt_id: str,
    merged: bool,
    producer_fields: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """The files of one attempt; ``producer_fields()`` gives each rank artifact its producer's own fields
    (written between ``observation_purpose`` and ``warmup_evidence``)."""
    native = mode == NATIVE
    points = points_of(manifest)
    grid = f"{grid_prefix}-{canonical_digest(manifest)[:16]}"
    docs, results, files = [], [], {}
    for r in range(ranks):
        doc, res, lines, records = rank_doc(
            points, r, ranks, native=native, grid_digest=grid, run_id=run_id, samples=samples
        )
        doc.update(
            {
                "execution_mode": mode,
                "execution_identity": dict(cell["execution_identity"]),
                "observation_purpose": "fpm",
                **producer_fields(),
                "warmup_evidence": {"status": "recorded", "records": records},
            }
        )
        if native:
            side = "repetitions.jsonl" if r == 0 else f"repetitions.r{r}.jsonl"
            doc["repetition_evidence"] = sidecar_evidence(side, lines)
            files[side] = lines
        docs.append(doc)
        results.append(res)
    add_groups(docs, results, points)
    for r, doc in enumerate(docs):
        files[f"r{r}.json"] = doc
    files["provenance.json"] = {
        "schema_name": "fpmcore_collector_provenance",
        "schema_version": 1,
        "cell_id": cell["cell_id"],
        "plan_sha256": plan["sha256"],
        "attempt_id": attempt_id,
        "runtime": {"backend": "vllm", "backend_version": VLLM},
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

    def producer_fields() -> dict[str, Any]:
        return {
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
        }

    return _attempt(plan, cell, manifest, mode=NATIVE, grid_prefix="glm53flash-smoke", ranks=ranks, samples=10,
                    run_id=run_id, attempt_id=attempt_id, merged=merged, producer_fields=producer_fields)  # fmt: skip


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

    def producer_fields() -> dict[str, Any]:
        return {
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
            "measurement_protocol": dsv41_protocol(),
        }

    return _attempt(plan, cell, manifest, mode="eager", grid_prefix="dsv41", ranks=ranks, samples=samples,
                    run_id=run_id, attempt_id=attempt_id, merged=False, producer_fields=producer_fields)  # fmt: skip


def glm_example(
    ranks: int = 1, producer_dir: str | Path = PRODUCER_DIR
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(plan, cell, files)`` of the valid GLM smoke example (05 §9.1, §9.2)."""
    plan = glm_plan()
    cell = next(c for c in plan["cells"] if c["point_set"] == "smoke")
    return plan, cell, glm_cell(plan, cell, SMOKE_MANIFEST, ranks=ranks, producer_dir=producer_dir)

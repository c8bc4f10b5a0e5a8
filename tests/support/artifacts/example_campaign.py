"""The fixed values of the example campaign: its models, its deployment, the staged lists and the protocols.

Timings are deterministic: every point repeats the raw wall times of 05 §9.1
(:data:`PATTERN`) scaled by the point's size. The GLM ``producer`` record
carries the SHA-256 of the producer files in :data:`PRODUCER_DIR` (05 §7.2).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from fpmcore.documents.jsonio import canonical_bytes

ROOT = Path(__file__).resolve().parents[3]
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
#: The staged list of the DeepSeek V4.1 eager cell.
DSV41_MANIFEST = {
    "schema_version": 3,
    "prefill": [{"batch_size": 1, "total_prefill_tokens": 512, "total_kv_read_tokens": 0, "rows": [[512, 0]]}],
    "decode": [{"batch_size": 4, "total_kv_read_tokens": 16384}],
}

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


def dsv41_protocol() -> dict[str, Any]:
    """``measurement_protocol`` of the DeepSeek V4.1 eager producer: the GLM one on ShareGPT text, no producer."""
    protocol = {
        **glm_protocol(),
        "synthetic_content": "sharegpt",
        "content_seed": "0",
        "synthetic_pool_tag": "dsv41_sharegpt_v1",
    }
    del protocol["producer"]
    return protocol


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

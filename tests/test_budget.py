"""The cache budget of 01 §8 (P-80 … P-94) with the reference's numbers."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from fpmcore.documents.budget import BudgetRequest, cache_budget
from fpmcore.documents.errors import FpmError
from fpmcore.documents.profile import FpmCacheGroup, from_data, load_profile

ROOT = Path(__file__).resolve().parents[1]
GLM = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"

GROUP_A = FpmCacheGroup(name="A", kind="attention", num_layers=2, block_size_tokens=16, page_size_bytes=160,
                        sliding_window=32)  # fmt: skip


def _profile(resources: dict, experts: int = 0) -> object:
    return from_data({
        "schema_version": 1, "model": "m", "model_revision": "0" * 40, "architecture": "A",
        "context_length": 8192, "num_experts": experts, "provenance": "test",
        "deployments": [{
            "system": "h200_sxm", "backend": "vllm", "backend_version": "0.33.0",
            "tp": 1, "pp": 1, "dp": 1, "moe_tp": 1, "moe_ep": 1, "cp": 1,
            "gemm_quant_mode": "bfloat16", "moe_quant_mode": "bfloat16", "fmha_quant_mode": "bfloat16",
            "comm_quant_mode": "half", "kv_cache_dtype": "bfloat16",
            "resources": {"max_num_tokens": 128, "max_batch_size": 8, "provenance": "test", **resources},
        }],
    })  # fmt: skip


DECLARED = {
    "weights_bytes": 100, "activations_bytes": 20, "runtime_overhead_bytes": 30, "comm_overhead_bytes": 50,
    "cache_layout": "grouped",
    "cache_groups": [{"name": "A", "kind": "attention", "num_layers": 2, "block_size_tokens": 16,
                      "page_size_bytes": 160, "sliding_window": 32}],
}  # fmt: skip
RUNTIME = {
    "runtime_memory": {"kv_cache_bytes": 600, "gpu_memory_utilization": 0.8, "max_model_len": 4096,
                       "provenance": "test"},
    "cache_layout": "linear", "kv_bytes_per_token": 10,
}  # fmt: skip

REQ = BudgetRequest(
    total_gpu_capacity_bytes=1000, memory_fraction_kind="of_total", memory_fraction_value=0.8,
    max_num_tokens=128, max_batch_size=8, system="h200_sxm", backend="vllm", backend_version="0.33.0",
    tp=1, dp=1, moe_tp=1, moe_ep=1,
)  # fmt: skip


def test_declared_budget_reference_numbers():
    p = _profile(DECLARED)
    b = cache_budget(p, attrs.evolve(REQ, cuda_graph_reserved_bytes=20))
    assert b.total_bytes == 580
    b = cache_budget(p, attrs.evolve(REQ, cuda_graph_reserved_bytes=20, tolerance_fraction=0.1,
                                     context_length=4096))  # fmt: skip
    assert b.budget_bytes == 522
    assert b.request_peak_cache_bytes == 1760  # group A at context 4,096 and 128 tokens
    assert b.budget_tokens is None  # none for grouped


def test_runtime_memory_budget_reference_numbers():
    p = _profile(RUNTIME)
    b = cache_budget(p, REQ)
    assert (b.total_bytes, b.budget_tokens) == (600, 60)
    assert cache_budget(p, attrs.evolve(REQ, tolerance_fraction=0.1)).budget_tokens == 54
    for capacity in (749, 599):  # floor(749 x 0.8) = 599 < 600
        with pytest.raises(FpmError) as info:
            cache_budget(p, attrs.evolve(REQ, total_gpu_capacity_bytes=capacity))
        assert info.value.rule == "P-92"
    with pytest.raises(FpmError) as info:
        cache_budget(p, attrs.evolve(REQ, total_gpu_capacity_bytes=749))
    assert info.value.message == (
        "GPU memory budget is smaller than the recorded runtime KV cache allocation: floor(749 x 0.8) = 599 < 600"
    )


def test_glm_budget_and_peak():
    p = load_profile(GLM)
    req = BudgetRequest(
        total_gpu_capacity_bytes=288 * 2**30, memory_fraction_kind="of_total", memory_fraction_value=0.9,
        max_num_tokens=8192, max_batch_size=256, context_length=1_048_576, system="gb300", backend="vllm",
        backend_version="0.33.0", tp=4, dp=1, moe_tp=4, moe_ep=1,
    )  # fmt: skip
    b = cache_budget(p, req)
    assert b.budget_bytes == 185_126_092_800
    assert b.request_peak_cache_bytes == 6_582_681_600
    assert b.budget_bytes // b.request_peak_cache_bytes == 28


@pytest.mark.parametrize(
    ("profile", "edits", "rule", "message"),
    [
        (
            RUNTIME,
            {"memory_fraction_kind": "of_free"},
            "P-80",
            "vLLM FPM resources require memory_fraction_kind='of_total'",
        ),
        (
            RUNTIME,
            {"memory_fraction_value": 1.5},
            "P-81",
            "memory_fraction_value must be finite and in [0, 1]; got 1.5",
        ),
        (
            RUNTIME,
            {"memory_fraction_value": float("nan")},
            "P-81",
            "memory_fraction_value must be finite and in [0, 1]; got nan",
        ),
        (RUNTIME, {"tolerance_fraction": 1.0}, "P-82", "tolerance_fraction must be finite and in [0, 1); got 1.0"),
        (
            RUNTIME,
            {"total_gpu_capacity_bytes": 0},
            "P-83",
            "GPU capacity must be positive and no greater than 2**53; got 0",
        ),
        (
            RUNTIME,
            {"max_num_tokens": 0},
            "P-84",
            "FPM resource envelope exceeded: provide bounds for the requested positive rank-local scheduler envelope",
        ),
        (
            RUNTIME,
            {"max_batch_size": 9},
            "P-84",
            "FPM resource envelope exceeded: provide bounds for the requested positive rank-local scheduler envelope",
        ),
        (RUNTIME, {"tp": 2}, "P-85", "no matching FPM deployment resources"),
        (
            RUNTIME,
            {"context_length": 8193},
            "P-87",
            "context_length must be positive and within the FPM profile context bound; got 8193",
        ),
        (
            RUNTIME,
            {"max_num_tokens": 64},
            "P-88",
            "runtime memory requires the exact recorded rank-local scheduler settings; collect new runtime memory for changed settings",
        ),
        (
            RUNTIME,
            {"context_length": 4097},
            "P-89",
            "context_length exceeds runtime memory max_model_len; got 4097 > 4096",
        ),
        (
            RUNTIME,
            {"memory_fraction_value": 0.9},
            "P-90",
            "memory_fraction_value must match runtime memory gpu_memory_utilization; got 0.9, recorded 0.8",
        ),
        (
            RUNTIME,
            {"cuda_graph_reserved_bytes": 1},
            "P-91",
            "runtime memory already includes graph reservations; cuda_graph_reserved_bytes must be 0",
        ),
        (
            DECLARED,
            {"cuda_graph_reserved_bytes": 2**53},
            "P-93",
            "total FPM non-KV bytes including CUDA graphs must not exceed 2**53",
        ),
        (DECLARED, {"total_gpu_capacity_bytes": 250}, "P-94", "no KV budget after non-KV resources and CUDA graphs"),
    ],
)
def test_budget_rules(profile, edits, rule, message):
    with pytest.raises(FpmError) as info:
        cache_budget(_profile(profile), attrs.evolve(REQ, **edits))
    assert (info.value.rule, info.value.message) == (rule, message)


def test_p86_duplicate_match():
    p = _profile(RUNTIME)
    dep = p.deployments[0]
    twin = attrs.evolve(p, deployments=(dep, attrs.evolve(dep, kv_cache_dtype="fp8")))  # same identity
    with pytest.raises(FpmError) as info:
        cache_budget(twin, REQ)
    assert (info.value.rule, info.value.message) == ("P-86", "duplicate FPM deployment resources")


def test_missing_keys_default_to_1_for_pp_cp_and_0_otherwise():
    p = _profile(RUNTIME)
    # pp/cp unset: they default to 1 and match; tp unset: defaults to 0 and does not match tp=1.
    assert cache_budget(p, REQ).total_bytes == 600
    with pytest.raises(FpmError) as info:
        cache_budget(p, attrs.evolve(REQ, tp=None))
    assert info.value.rule == "P-85"


def test_pending_memory_p40():
    res = {k: v for k, v in DECLARED.items() if k != "comm_overhead_bytes"}
    with pytest.raises(FpmError) as info:
        cache_budget(_profile(res), REQ)
    assert info.value.rule == "P-40"

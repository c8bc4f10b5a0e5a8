"""vLLM 0.32.0's class table and import rules, through the host (README §1, §5; 02 §5.2, 03 C-1).

The numbers are the live CPU engine's (plugins/vllm_032/README.md §5):
the Qwen3-Next-like hybrid in bfloat16 with prefix caching
on has three Mamba groups and one attention group of 384-token blocks at
``max_model_len`` 2048, so each Mamba group reserves ``2 + 0 + 0`` blocks in
align mode and the attention group ``cdiv(2048, 384)`` = 6: 12 blocks per
request, and 5,461 / 12 = 455.083… is the engine's ``kv_cache_max_concurrency``.
"""

from __future__ import annotations

import pytest

from fpmcore.documents.errors import FpmError
from fpmcore.host.stage_hooktypes import HashBlockQuery, StartupLimits
from fpmcore.testing import make_host

RUNTIME = "vllm==0.32.0"
M = "vllm.v1.kv_cache_interface."


@pytest.fixture(scope="module")
def runtime():
    return make_host(entry_points=("vllm_032", "vllm_033")).hooks.runtime(RUNTIME)


@pytest.fixture(scope="module")
def rules(runtime):
    return runtime.rules()


@pytest.mark.parametrize(("name", "kind", "windowed", "reason"), [
    ("FullAttentionSpec", "attention", False, None),
    ("SlidingWindowSpec", "attention", True, None),
    ("MambaSpec", "state", False, None),
    ("CircularBufferSpec", "state", False, None),
    ("EncoderOnlyAttentionSpec", "unsupported", False, "vLLM 0.32.0 registers no cache manager for it"),
    ("KpoolTailSpec", "unsupported", False, "not a vLLM 0.32.0 class"),
    ("ChunkedLocalAttentionSpec", "attention", False, None),
    ("NoSuchSpec", "unsupported", False, "class unknown to vLLM 0.32.0"),
])  # fmt: skip
def test_class_table_names_its_release(runtime, name, kind, windowed, reason):
    c = runtime.classify_spec(spec_class=M + name, spec={})
    assert (c.kind, c.windowed, c.reason) == (kind, windowed, reason)
    assert c.chunked == (name == "ChunkedLocalAttentionSpec")


def test_the_plugin_is_selected_by_its_exact_pin_only():
    host = make_host(entry_points=("vllm_032", "vllm_033"))
    assert host.hooks.runtime(RUNTIME).plugin == "vllm_032"
    for pin in ("vllm==0.32", "vllm==0.32.0.post1", "vllm==0.32.1"):
        with pytest.raises(FpmError, match="no runtime plugin for"):
            host.hooks.runtime(pin)


def test_hybrid_evidence_and_the_shared_formulas(rules):
    assert (rules.version, rules.hybrid_evidence) == ("0.32.0", True)
    align = StartupLimits(max_model_len=2048, in_flight_tokens=4096, mamba_cache_mode="align")
    mamba = {"num_speculative_blocks": 0, "num_prefill_checkpoint_blocks": 0}
    assert rules.startup_blocks(M + "MambaSpec", mamba, 384, align) == (
        2,
        "align mode: 2 + 0 speculative + 0 checkpoint",
    )
    assert rules.startup_blocks(M + "FullAttentionSpec", {}, 384, align) == (6, "cdiv(2048, 384)")
    # caching off: mode none, the Mamba groups hold 2048-token blocks and reserve one block each
    none = StartupLimits(max_model_len=2048, in_flight_tokens=4096, mamba_cache_mode="none")
    assert rules.startup_blocks(M + "MambaSpec", mamba, 2048, none) == (1, "mode none: 1 + 0 speculative")
    assert 5461 / (3 * 2 + 6) == 455.0833333333333 and 5461 / (3 * 1 + 6) == 606.7777777777778
    # the llama-swa kind: window 64, budget 4096, block 128 -> cdiv(min(63 + 4096, 2048), 128) + 1
    assert rules.startup_blocks(M + "SlidingWindowSpec", {"sliding_window": 64}, 128, StartupLimits(2048, 4096)) == (
        17,
        "cdiv(min(64 - 1 + 0 + 4096, 2048), 128) + 1",
    )
    assert (
        rules.state_family(M + "MambaSpec") == "mamba" and rules.prefix_cacheable(M + "CircularBufferSpec", {}) is False
    )


def test_hash_block_size_of_the_hybrid(rules):
    """I-97 on the engine's groups: caching on gives the gcd 384, caching off the scheduler block 6144 (the lcm)."""
    on = HashBlockQuery(block_sizes=(384, 384, 384, 384), prefix_cacheable=(True,) * 4,
                        layer_specs=((M + "MambaSpec", {"mamba_cache_mode": "align"}),) * 3 + ((M + "FullAttentionSpec", {}),),
                        scheduler_block_size=384, enable_prefix_caching=True, prefix_match_unit=None)  # fmt: skip
    off = HashBlockQuery(block_sizes=(2048, 2048, 2048, 384), prefix_cacheable=(True,) * 4,
                         layer_specs=((M + "MambaSpec", {"mamba_cache_mode": "none"}),) * 3 + ((M + "FullAttentionSpec", {}),),
                         scheduler_block_size=6144, enable_prefix_caching=False, prefix_match_unit=None)  # fmt: skip
    assert (rules.hash_block_size(on), rules.hash_block_size(off)) == (384, 6144)


def test_what_cannot_hold_on_the_cpu_engine(rules):
    """README D-L3, §5: the rules that state where 02 cannot hold on the CPU engine, and nothing else."""
    assert rules.kv_cache_sizing == {"cache.kv_cache_memory_bytes", "cache.num_gpu_blocks_override"}
    assert set(rules.storage_devices) == {"cuda:", "cpu"}
    assert rules.absent_hardware == {"sm"}
    assert rules.graph_capture is False
    assert rules.model_dtype_labels == {
        "torch.bfloat16": "bfloat16",
        "torch.float16": "half",
        "torch.float32": "float32",
    }


def test_vllm_033_keeps_the_rules_of_02_as_written():
    rules = make_host(entry_points=("vllm_033",)).hooks.runtime("vllm==0.33.0").rules()
    assert (rules.kv_cache_sizing, tuple(rules.storage_devices), rules.absent_hardware, rules.graph_capture) == (
        frozenset(),
        ("cuda:",),
        frozenset(),
        True,
    )
    assert "torch.float32" not in rules.model_dtype_labels

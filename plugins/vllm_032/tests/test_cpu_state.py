"""The live tests' expected numbers for the tiny Qwen3-Next, on a CPU with and without AVX-512 BF16 (README D-L14)."""

from __future__ import annotations

from plugins.vllm_032.tests.cpu_state import gdn_hybrid_numbers


def test_the_gdn_hybrid_numbers_follow_the_configuration_and_the_cpu():
    """The tiny Qwen3-Next's numbers on either CPU (README §7 and D-L14), with the arithmetic spelled out."""
    config = {"layer_types": ["linear_attention"] * 3 + ["full_attention"], "linear_conv_kernel_dim": 4,
              "linear_num_key_heads": 2, "linear_key_head_dim": 128, "linear_num_value_heads": 4,
              "linear_value_head_dim": 128, "num_key_value_heads": 2, "head_dim": 64}  # fmt: skip
    # AVX2: a state of 6,144 + 131,072 B; 512 B a token: 268 tokens, a block of 384 (196,608 B); 1365 blocks
    avx2 = gdn_hybrid_numbers(config, caching=True, ssm_float32=False)
    assert avx2["state_bytes"] == (6144, 131072)
    assert avx2["groups"] == [("MambaSpec", 384, 196608)] * 3 + [("FullAttentionSpec", 384, 196608)]
    assert (avx2["num_blocks"], avx2["kv_cache_max_concurrency"], avx2["block_size"]) == (1365, 1365 / 12, 384)
    off = gdn_hybrid_numbers(config, caching=False, ssm_float32=False)
    assert off["groups"][0] == ("MambaSpec", 2048, 196608)
    assert (off["kv_cache_max_concurrency"], off["block_size"]) == (1365 / 9, 6144)
    # AVX-512 BF16: a float32 temporal state, 6,144 + 262,144 B: 524 tokens, a block of 640 (327,680 B); 819 blocks
    bf16 = gdn_hybrid_numbers(config, caching=True, ssm_float32=True)
    assert bf16["state_bytes"] == (6144, 262144)
    assert bf16["groups"][3] == ("FullAttentionSpec", 640, 327680)
    assert (bf16["num_blocks"], bf16["kv_cache_max_concurrency"], bf16["block_size"]) == (819, 81.9, 640)
    off = gdn_hybrid_numbers(config, caching=False, ssm_float32=True)
    assert (off["kv_cache_max_concurrency"], off["block_size"]) == (117.0, 10240)

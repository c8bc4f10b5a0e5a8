"""What the live tests' expected numbers depend on in the CPU the engine runs on."""

from __future__ import annotations

import math
from typing import Any


def cpu_keeps_ssm_state_in_float32() -> bool:
    """The CPU has AVX-512 BF16, on which vLLM 0.32.0 keeps a Mamba/GDN SSM state in float32 (README D-L14).

    The same test as the engine's (``torch.cpu._is_avx512_bf16_supported()``, vllm/platforms/cpu.py:301-316):
    with ``mamba_ssm_cache_dtype`` "auto" the state is reset to float32 there.
    """
    import torch

    return bool(torch.cpu._is_avx512_bf16_supported())


#: The KV cache of the probes (``--kv-cache-space 0.25``) and their context (``--max-model-len``).
KV_BYTES = 1 << 28
MAX_MODEL_LEN = 2048
#: The CPU platform's block (vllm/platforms/cpu.py:292-293), also the kernel block alignment of the hybrid
#: attention block (vllm/platforms/interface.py:1060-1091).
CPU_BLOCK = 128


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def gdn_hybrid_numbers(config: dict[str, Any], caching: bool, ssm_float32: bool) -> dict[str, Any]:
    """What vLLM 0.32.0 plans for a Qwen3-Next-like model in bfloat16, from its ``config.json``.

    * the GDN state of a layer (vllm/model_executor/layers/mamba/mamba_utils.py, ``gated_delta_net_state_shape``):
      a convolution state of ``(conv_kernel − 1) × (2 · key heads · key dim + value heads · value dim)`` in the
      model dtype and a temporal state of ``value heads × key dim × value dim``, in float32 where
      :func:`cpu_keeps_ssm_state_in_float32`, else in the model dtype;
    * the attention page of one token: K and V of ``num_key_value_heads × head_dim`` in bfloat16;
    * the attention block: the smallest multiple of 128 tokens whose page holds the state
      (``_align_hybrid_block_size``, vllm/platforms/interface.py:1085-1088), the state page padded to it;
    * ``num_blocks`` = the KV bytes // the page; a request of ``max_model_len`` tokens holds per GDN layer 2
      blocks with prefix caching (align mode) and 1 without (kv_cache_interface.py:1076-1082), and
      ``cdiv(max_model_len, block)`` attention blocks; the GDN groups' block is ``max_model_len`` without caching
      (model_executor/models/config.py:709), and the scheduler block the lcm of the groups' blocks
      (kv_cache_utils.py:851).
    """
    bf16 = 2
    n_gdn = config["layer_types"].count("linear_attention")
    n_full = config["layer_types"].count("full_attention")
    assert n_full == 1  # one layer per group: n_gdn state groups and one attention group
    conv_dim = (
        2 * config["linear_num_key_heads"] * config["linear_key_head_dim"]
        + config["linear_num_value_heads"] * config["linear_value_head_dim"]
    )
    conv_bytes = (config["linear_conv_kernel_dim"] - 1) * conv_dim * bf16
    ssm_elements = config["linear_num_value_heads"] * config["linear_key_head_dim"] * config["linear_value_head_dim"]
    ssm_bytes = ssm_elements * (4 if ssm_float32 else bf16)
    token_bytes = 2 * config["num_key_value_heads"] * config["head_dim"] * bf16
    block = CPU_BLOCK * cdiv(conv_bytes + ssm_bytes, CPU_BLOCK * token_bytes)
    page = block * token_bytes
    num_blocks = KV_BYTES // page
    state_block = block if caching else MAX_MODEL_LEN
    per_request = n_gdn * (2 if caching else 1) + cdiv(MAX_MODEL_LEN, block)
    scheduler_block = block if caching else math.lcm(MAX_MODEL_LEN, block)
    return {
        "groups": [("MambaSpec", state_block, page)] * n_gdn + [("FullAttentionSpec", block, page)],
        "state_bytes": (conv_bytes, ssm_bytes),
        "num_blocks": num_blocks,
        "kv_cache_max_concurrency": num_blocks / per_request,
        "block_size": scheduler_block,
        "hash_block_size": scheduler_block,
    }

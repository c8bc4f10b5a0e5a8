"""The import rules of vLLM 0.32.0 besides its class table (``fpm_runtime_rules``).

What vLLM 0.32.0 shares with 0.33.0 (README §1-§2: the same spec classes,
``prefix_cacheable`` properties, ``max_memory_usage_bytes`` formulas and
``resolve_kv_cache_block_sizes``) comes from
:func:`fpmcore_vllm_support.rules.hybrid_rules`, whose functions cite the
0.32.0 lines: records with hybrid evidence import (I-22), the KV dtype labels
(I-32), the §5.1 table of records without hybrid evidence, the state
families, the ``prefix_cacheable`` class rule (I-44), the startup reservation
of 03 C-1 (I-61, stage K), the in-flight batches of 03 C-2 and the hash block
size of I-97.

What is the CPU engine's own (README §5) and cannot hold as 02 writes it for a
GPU deployment, stated so that the import accepts exactly that and names it
in a note:

``kv_cache_sizing`` (I-31)
    The CPU worker sizes the KV cache from ``cache_config.kv_cache_memory_bytes``
    (vllm/v1/worker/cpu_worker.py:204-262; ``VLLM_CPU_KVCACHE_SPACE`` is read as
    whole GiB into it, vllm/platforms/cpu.py:323-326): the platform's own sizing,
    not an override of a profiled allowance.  A pool forced to a block count
    (``num_gpu_blocks_override``, vllm/v1/core/kv_cache_utils.py:1230-1236) sizes
    it the same way; the replay check under memory pressure needs it.
``storage_devices`` (I-64)
    The cache tensors live in host memory: device ``cpu``.
``absent_hardware`` (I-35)
    A CPU has no CUDA compute capability: ``hardware.sm`` is ``null``.
``graph_capture`` (I-20)
    The CPU worker captures no graphs (``CPUWorker.compile_or_warm_up_model``,
    vllm/v1/worker/cpu_worker.py:264-277, warms up only):
    ``capture_completed`` is ``false``.
``model_dtype_labels`` (I-32, I-33)
    The CPU engine runs models in float32 natively (AVX2 has no bfloat16
    arithmetic): KV cache dtype ``auto`` of a float32 model takes the label
    ``float32``.

vLLM is never imported here.
"""

from __future__ import annotations

from fpmcore.plugin_api import MODEL_DTYPE_LABELS
from fpmcore_vllm032 import VERSION as VERSION  # the release the plugin targets: one place
from fpmcore_vllm_support.rules import hybrid_rules

RULES = hybrid_rules(
    VERSION,
    kv_cache_sizing=frozenset({"cache.kv_cache_memory_bytes", "cache.num_gpu_blocks_override"}),
    storage_devices=("cuda:", "cpu"),
    absent_hardware=frozenset({"sm"}),
    graph_capture=False,
    model_dtype_labels={**MODEL_DTYPE_LABELS, "torch.float32": "float32"},
)

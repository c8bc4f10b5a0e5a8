"""Probe side of *observe cache groups* for vLLM 0.27.0 (02 §3.14).

The plugin (``fpmcore_vllm027.plugin.build_record``, the
``fpm_observe_cache_groups`` hook) writes the ``fpmcore-runtime-observation/v1``
record of a vLLM 0.27.0 process.  It never writes hybrid evidence: no ``prefix_caching``,
no ``state``/``layer_specs``/``spec_fields``, ``startup_blocks_per_request``
``null``, and the keys vLLM 0.27.0 lacks are ``null`` (the table of 02 §3.14).

The ``source`` mapping is that of :mod:`fpmcore_vllm_support.observe`
(``kind``, ``dp_rank``, ``launch``, ``vllm_config``, ``kv_cache_config``,
``kv_caches``, ``scheduler``, ``available_cache_bytes``, ``hardware``,
``lifecycle``, ``model``, ``image``, ``source_revision``, ``error``), holding
vLLM 0.27.0's own objects: the process must run vLLM 0.27.0.

**Allocations.**  vLLM 0.27.0's ``KVCacheTensor`` is ``(size, shared_by,
offset, block_stride)`` (vllm/v1/kv_cache_interface.py).  Each tensor is one
allocation; ``layers`` is its ``shared_by`` list (one layer of each group,
vllm/v1/core/kv_cache_utils.py ``get_kv_cache_config_from_groups``) and
``offset`` its ``offset``.  A tensor of vLLM's packed plan
(``block_stride > 0``: every tensor aliases one backing of
``block_stride × num_blocks`` bytes) is a **packed** allocation with that
``block_stride``.  Any other tensor is a separate ``torch.zeros(size)``
(gpu_model_runner ``_allocate_kv_cache_tensors``) that the attention backend
views in its own shape: with the views, ``block_stride`` is the slot when
every view walks the blocks on its outermost axis in whole slots (packed),
else 0 (whole); without views (a dry probe) it is 0 (whole), as vLLM plans it
(``block_stride`` 0, "not packed"): a separate allocation whose blocks only
the views place (02 §3.14, I-76).

The record is assembled by :func:`fpmcore_vllm_support.observe.build_record`
(identity blocks, settings, groups, the scheduler's cache), without hybrid
evidence; the files it reads (:data:`SOURCE_FILES`) and the worker ``cache``
of vLLM 0.27.0's tensors (:func:`worker_cache`) are here.  vLLM and torch are imported inside the functions only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fpmcore.plugin_api import Allocation, LayerView, WorkerCache
from fpmcore_vllm_support import observe

#: vLLM 0.27.0 (commit 4bdc8a78): the files the observer reads, with the
#: SHA-256 of their bytes in that release.
SOURCE_FILES: dict[str, str] = {
    "vllm/config/model.py": "d14c60ce1b2a7d9c47983ef0df0c10c4f8083ced5bc45935e8ababfe59f22736",
    "vllm/v1/core/block_pool.py": "51cad2fd425128a0ff433ca4685acfc022e40659153ea5d7180fc586e1eebb6c",
    "vllm/v1/core/kv_cache_manager.py": "70f7f608c0963af155540630a5633483e5c19c0c0280dfd621760d5db2a419a6",
    "vllm/v1/core/kv_cache_utils.py": "0ab5385925f660395612e3f69030cad3b18c2e0bd6fb61d3ff43072a6cefb74f",
    "vllm/v1/core/sched/scheduler.py": "c67bda2886b52865ddafabaae7d797c359e930752f374421a33e537d94a5f45a",
    "vllm/v1/kv_cache_interface.py": "bfbd62f02d900faf043ce0aeb46de0a10d7ce531351fced789805a6b817a7f80",
    "vllm/v1/worker/gpu_model_runner.py": "993f2c926012241bcb8cc7f568c8e82968e4d81ca125641c831ecf501aac02ac",
    "vllm/v1/worker/utils.py": "8bdd2c60ee6443092cc0ea60e62343fd1ae6ad9a94888925bd7a83d5b4ae110d",
}


def _block_axis(tensor: Any, n: int) -> int:
    """The axis that walks the pool blocks: the longest-stride axis whose length is a multiple of n."""
    axes = [a for a, size in enumerate(tensor.shape) if size % n == 0]
    return max(axes, key=lambda a: tensor.stride(a)) if axes else 0


def worker_cache(
    source: Mapping[str, Any], unresolved: observe.Unresolved, release: observe.Release
) -> WorkerCache:
    """The worker ``cache`` object (02 §3.6, §3.14) of vLLM 0.27.0's tensors."""
    kcc = source["kv_cache_config"]
    n = kcc.num_blocks
    kv_caches = source.get("kv_caches")
    groups = list(kcc.kv_cache_groups)
    storages = observe.Storages()
    layer_views: dict[str, list[LayerView]] = {}
    if kv_caches is None:
        for path in ("cache.storages", "cache.allocated_cache_bytes", "cache.layer_views"):
            unresolved.add(path)
    else:
        for g in groups:
            for name in g.layer_names:
                views = []
                for t in observe.tensors_of(kv_caches.get(name)):
                    axis = _block_axis(t, n)
                    views.append(LayerView(
                        storage_id=storages.id_of(t), **observe.view_layout(t), block_axis=axis,
                        kernel_block_size_tokens=g.kv_cache_spec.block_size // (int(t.shape[axis]) // n),
                    ))  # fmt: skip
                if views:
                    layer_views[name] = views
                else:
                    unresolved.add(f"cache.layer_views.{name}")

    allocations: list[Allocation] = []
    for k, tensor in enumerate(kcc.kv_cache_tensors):
        layers = list(tensor.shared_by)
        size = int(tensor.size)
        slot = size // n if n else 0
        planned = int(getattr(tensor, "block_stride", 0) or 0)
        first = observe.tensors_of(kv_caches.get(layers[0])) if kv_caches is not None else []
        views = [v for name in layers for v in layer_views.get(name, [])]
        if planned > 0:  # vLLM's packed plan: the block stride is planned
            block_stride = planned
        elif views:  # a separate tensor: the backend's views say whether each block is one contiguous slot
            block_stride = slot if all(v.block_axis == 0 and v.stride_bytes[0] == slot for v in views) else 0
        else:  # a separate tensor, no views yet: whole, as vLLM plans it (block_stride 0 = not packed)
            block_stride = 0
        sid = storages.id_of(first[0]) if first else None
        allocations.append(Allocation(
            storage_id=unresolved.value(f"cache.allocations[{k}].storage_id", sid), size=size, layers=layers,
            layer_stride=None, block_stride=block_stride, offset=int(getattr(tensor, "offset", 0) or 0),
        ))  # fmt: skip
    # no layout, attention groups or model runner in vLLM 0.27.0 records (02 §3.14)
    return observe.worker_cache(source, unresolved, release, storages=storages, allocations=allocations,
                                layer_views=layer_views)  # fmt: skip

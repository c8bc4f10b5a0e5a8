"""Probe side of *observe cache groups* for vLLM 0.33.0 (02 §3).

The plugin (``fpmcore_vllm033.plugin.build_record``, the
``fpm_observe_cache_groups`` hook) turns the live objects of one vLLM 0.33.0
process into one ``fpmcore-runtime-observation/v1`` record with hybrid
evidence: a worker record (02 §3.6-§3.10) or a scheduler record (02 §3.11).
It reads only what vLLM holds; a value it cannot read is ``null`` and its key
path is listed in ``unresolved_fields`` (02 §3.12).  It never writes a verdict.

The record is assembled by :func:`fpmcore_vllm_support.observe.build_record`
(identity blocks, settings, groups, the scheduler's cache, the ``source``
mapping it reads); what is vLLM 0.33.0's own is here: the files it reads
(:data:`SOURCE_FILES`) and the worker ``cache`` its tensors give
(:func:`worker_cache`: the planned
``KVCacheTensor(size, layers, layer_stride, block_stride, offset)``, the
model runner's attention groups and kernel block sizes, one view per tensor
bound to a layer, whose outermost axis walks the blocks).

vLLM and torch are imported inside the functions only, so that importing this
module (and the plugin) never needs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fpmcore.record import Allocation, AttentionGroup, LayerView, ModelRunner, WorkerCache
from fpmcore_vllm_support import observe
from fpmcore_vllm_support.encode import class_name, encode_value

#: The installed vLLM files whose objects the observer reads (02 §3.3).
SOURCE_FILES: tuple[str, ...] = (
    "vllm/config/cache.py",
    "vllm/config/compilation.py",
    "vllm/config/model.py",
    "vllm/config/parallel.py",
    "vllm/config/scheduler.py",
    "vllm/config/vllm.py",
    "vllm/v1/core/block_pool.py",
    "vllm/v1/core/kv_cache_manager.py",
    "vllm/v1/core/kv_cache_planning.py",
    "vllm/v1/core/kv_cache_utils.py",
    "vllm/v1/core/sched/scheduler.py",
    "vllm/v1/kv_cache_interface.py",
    "vllm/v1/worker/utils.py",
)


def _attention_groups(model_runner: Any) -> list[Any]:
    groups = getattr(model_runner, "attn_groups", None) or []
    return [g for per_group in groups for g in (per_group if isinstance(per_group, (list, tuple)) else [per_group])]


def worker_cache(
    source: Mapping[str, Any], unresolved: observe.Unresolved, release: observe.Release
) -> WorkerCache:
    """The worker ``cache`` object (02 §3.6) of vLLM 0.33.0's tensors."""
    vc = source["vllm_config"]
    kcc = source["kv_cache_config"]
    kv_caches = source.get("kv_caches")
    runner = source.get("model_runner")
    groups = list(kcc.kv_cache_groups)

    placement = "shared_pool"
    if any(g.host_resident or getattr(g.role, "value", g.role) != "default" for g in groups):
        placement = "hisparse"
        unresolved.add("cache.groups")

    storages = observe.Storages()
    layer_views: dict[str, list[LayerView]] = {}
    attention_groups: list[AttentionGroup] | None = None
    model_runner: ModelRunner | None = None
    kernel_block_sizes = list(getattr(runner, "kernel_block_sizes", None) or []) if runner is not None else []

    ag_of: dict[str, Any] = {}
    if runner is not None:
        attention_groups = []
        for ag in _attention_groups(runner):
            attention_groups.append(AttentionGroup(
                kv_cache_group_id=ag.kv_cache_group_id, backend=ag.backend.get_name(),
                layer_names=list(ag.layer_names), kernel_block_size=ag.kernel_block_size,
                kernel_block_stride=int(ag.kernel_block_stride),
            ))  # fmt: skip
            for name in ag.layer_names:
                ag_of[name] = ag
        model_runner = ModelRunner(
            runner_class=class_name(runner),
            version="v2" if getattr(vc, "use_v2_model_runner", False) else "v1",
            kernel_block_sizes=unresolved.value("cache.model_runner.kernel_block_sizes", kernel_block_sizes or None),
        )
    else:
        unresolved.add("cache.attention_groups")
        unresolved.add("cache.model_runner")

    if kv_caches is None:
        for path in ("cache.storages", "cache.allocated_cache_bytes", "cache.layer_views"):
            unresolved.add(path)
    else:
        n = kcc.num_blocks
        for gid, group in enumerate(groups):
            block = group.kv_cache_spec.block_size
            for name in group.layer_names:
                tensors = observe.tensors_of(kv_caches.get(name))
                if not tensors:
                    unresolved.add(f"cache.layer_views.{name}")
                    continue
                ag = ag_of.get(name)
                stride = int(ag.kernel_block_stride) if ag is not None else 0
                if ag is not None and ag.kernel_block_size is not None:
                    kernel = int(ag.kernel_block_size)
                elif gid < len(kernel_block_sizes):
                    kernel = int(kernel_block_sizes[gid])
                elif int(tensors[0].shape[0]) % n == 0 and block % (int(tensors[0].shape[0]) // n) == 0:
                    # no runner: the view holds n * r kernel blocks of B // r tokens
                    kernel = block // (int(tensors[0].shape[0]) // n)
                else:
                    unresolved.add(f"cache.layer_views.{name}")
                    continue
                layer_views[name] = [
                    LayerView(storage_id=storages.id_of(t), **observe.view_layout(t), block_axis=0,
                              kernel_block_size_tokens=kernel, kernel_block_stride=stride)
                    for t in tensors
                ]  # fmt: skip

    allocations = []
    for k, tensor in enumerate(kcc.kv_cache_tensors):
        views = observe.tensors_of(kv_caches.get(tensor.layers[0])) if kv_caches is not None else []
        allocations.append(Allocation(
            storage_id=unresolved.value(f"cache.allocations[{k}].storage_id", storages.id_of(views[0]) if views else None),
            size=tensor.size, layers=list(tensor.layers), layer_stride=tensor.layer_stride,
            block_stride=tensor.block_stride, offset=tensor.offset,
        ))  # fmt: skip

    layout = getattr(kcc, "kv_cache_layout", None) or getattr(vc.cache_config, "kv_cache_layout", None)
    return observe.worker_cache(
        source, unresolved, release, storages=storages, allocations=allocations, layer_views=layer_views,
        kv_cache_layout=unresolved.value("cache.kv_cache_layout", encode_value(layout)),
        attention_groups=attention_groups, model_runner=model_runner, placement=placement,
    )  # fmt: skip

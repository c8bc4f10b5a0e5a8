"""The dry probe of the vLLM releases that write hybrid evidence (0.32.0, 0.33.0), but their planning calls.

vLLM 0.32.0 and 0.33.0 build the same configuration from MODEL.json, take the
same spec fields, derive the Mamba cache mode the same way and finish the
engine core's planning with the same steps (the block size of the
prefix-cacheable groups, ``update_kv_cache_capacity``, the cache-hit
alignment; the 0.32.0 plugin's README §2 compares them function by function).
They differ in how the engine core reaches its per-rank cache configurations
(0.33.0 computes global groups first, 0.32.0 calls ``get_kv_cache_configs``
with three arguments; D-P1) and in the module that computes the pool page
(``_pool_bytes_per_block``: 0.33.0 ``kv_cache_planning``, 0.32.0
``kv_cache_utils``).  So a release's ``probe`` module gives those two and
takes everything else from here:

* :func:`build_vllm_config`, :func:`build_spec`, :func:`build_layer_specs`:
  MODEL.json → vLLM objects (:data:`CACHE_KEYS`, :data:`SCHEDULER_KEYS`,
  the spec field conversions of :func:`convert_fields`);
* :func:`supported_layouts`: the layouts the workers offer the engine core;
* :func:`plan`: the engine core's planning
  (:func:`fpmcore_vllm_support.dryprobe.engine_plan`) with the release's
  ``worker_configs``;
* :func:`plan_summary` and :func:`worker_source`.

vLLM and torch are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from fpmcore_vllm_support import dryprobe
from fpmcore_vllm_support.encode import cdiv

#: vLLM's default layout preference when MODEL.json pins none.
DEFAULT_LAYOUTS = ("LBNHC", "LBHNC", "BLNHC", "BLHNC", "BHLNC", "LHBNC")

#: The ``cache`` options of MODEL.json that the releases' ``CacheConfig`` takes (when not null).
CACHE_KEYS = (
    "cache_dtype",
    "gpu_memory_utilization",
    "mamba_block_size",
    "mamba_page_size_padded",
    "prefix_match_unit",
    "prefix_cache_retention_interval",
    "num_gpu_blocks_override",
    "enable_mamba_shared_prefix_checkpoint",
    "prefix_caching_hash_algo",
)
#: The ``scheduler`` options of MODEL.json that the releases' ``SchedulerConfig`` takes.
SCHEDULER_KEYS = (
    "max_num_batched_tokens",
    "max_num_seqs",
    "long_prefill_token_threshold",
    "scheduler_reserve_full_isl",
    "watermark",
    "policy",
)

#: ``worker_configs(model, vllm_config, per-rank specs, memory)``: the release's per-rank cache configurations.
WorkerConfigs = Callable[[Mapping[str, Any], Any, list[Any], int], list[Any]]


def has_mamba(model: Mapping[str, Any]) -> bool:
    return any(entry["spec"]["type"] == "MambaSpec" for entry in model["layers"])


def build_vllm_config(model: Mapping[str, Any], *, tp: int, caching: bool, model_dir: str) -> Any:
    """The engine core's ``VllmConfig`` before cache planning, Mamba modes derived as vLLM derives them."""
    # vLLM accepts mamba_block_size only with prefix caching
    keys = CACHE_KEYS if caching else tuple(k for k in CACHE_KEYS if k != "mamba_block_size")
    vllm_config = dryprobe.build_vllm_config(
        model, tp=tp, caching=caching, model_dir=model_dir, cache_keys=keys, scheduler_keys=SCHEDULER_KEYS
    )
    if has_mamba(model):
        # vLLM's own derivation of mamba_cache_mode / mamba_block_size from prefix caching
        from vllm.model_executor.models.config import MambaModelConfig

        MambaModelConfig.verify_and_update_config(vllm_config)
    return vllm_config


def convert_fields(cls: type, fields: dict[str, Any], vllm_config: Any) -> None:
    """The releases' spec fields of MODEL.json: dtype lists, shapes, fractions, enums, ``MultipleOf``, Mamba defaults."""
    from vllm.v1 import kv_cache_interface as kvi
    from vllm.v1.attention.backend import MultipleOf
    from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum

    cc = vllm_config.cache_config
    if "dtypes" in fields:
        fields["dtypes"] = tuple(dryprobe.torch_dtype(d) for d in fields["dtypes"])
    if "shapes" in fields:
        fields["shapes"] = tuple(tuple(int(x) for x in s) for s in fields["shapes"])
    tps = fields.get("tokens_per_state")
    if isinstance(tps, str) and "/" in tps:
        fields["tokens_per_state"] = Fraction(tps)
    if "mamba_type" in fields:
        fields["mamba_type"] = MambaAttentionBackendEnum[fields["mamba_type"]]
    if "cache_role" in fields:
        fields["cache_role"] = kvi.SparseCacheRole(str(fields["cache_role"]).lower())
    bsa = fields.get("block_stride_alignment")
    if isinstance(bsa, Mapping):
        fields["block_stride_alignment"] = MultipleOf(int(bsa["multiple_of"]))
    if issubclass(cls, kvi.MambaSpec):
        # as MambaBase.get_kv_cache_spec: block, padding and mode from the cache config
        for key, value in (("block_size", cc.mamba_block_size), ("page_size_padded", cc.mamba_page_size_padded),
                           ("mamba_cache_mode", cc.mamba_cache_mode)):  # fmt: skip
            if fields.get(key, "auto") == "auto":
                fields[key] = value


def build_spec(spec_json: Mapping[str, Any], vllm_config: Any) -> Any:
    """A ``KVCacheSpec`` from ``{"type": <class>, <fields>}``."""
    return dryprobe.build_spec(spec_json, vllm_config, convert=convert_fields)


def build_layer_specs(model: Mapping[str, Any], vllm_config: Any) -> dict[str, Any]:
    """``{layer name: spec}`` in model registration order (:func:`fpmcore.probe.dry_run.layer_specs`)."""
    return dryprobe.layer_specs(model, vllm_config, build_spec)


def supported_layouts(model: Mapping[str, Any], tp: int) -> list[list[str]]:
    """The KV cache layouts each of the ``tp`` workers supports: MODEL.json's pinned one, its list, or vLLM's default."""
    if model.get("kv_cache_layout"):
        return [[model["kv_cache_layout"]]] * tp
    return [list(model.get("supported_layouts") or DEFAULT_LAYOUTS)] * tp


def capacity(vllm_config: Any, scheduler_config: Any) -> None:
    """The engine core's block size (the smallest prefix-cacheable group block) and ``update_kv_cache_capacity``."""
    from vllm.v1.core.kv_cache_utils import update_kv_cache_capacity

    groups = scheduler_config.kv_cache_groups
    if groups:
        participating = [g.kv_cache_spec.block_size for g in groups if g.kv_cache_spec.prefix_cacheable]
        vllm_config.cache_config.block_size = min(participating or [g.kv_cache_spec.block_size for g in groups])
        update_kv_cache_capacity(vllm_config, scheduler_config)


def resolved(vllm_config: Any, scheduler_config: Any, worker_configs: list[Any], block_sizes: tuple[int, int]) -> None:
    """Every configuration holds the hash block size and the cache-hit alignment."""
    from vllm.v1.core.kv_cache_utils import resolve_cache_hit_alignment_tokens

    block_size, hash_block_size = block_sizes
    alignment = resolve_cache_hit_alignment_tokens(scheduler_config, vllm_config, block_size, hash_block_size)
    for cfg in (*worker_configs, scheduler_config):
        cfg.hash_block_size = hash_block_size
        cfg.cache_hit_alignment_tokens = alignment


def plan(
    model: Mapping[str, Any], *, tp: int, caching: bool, model_dir: str, worker_configs: WorkerConfigs
) -> dryprobe.DryPlan:
    """The engine core's cache planning (``_initialize_kv_caches``) with the release's ``worker_configs``, on CPU.

    The steps after the per-rank configurations are the releases' shared
    ones: the smallest prefix-cacheable block and
    ``update_kv_cache_capacity``, and the cache-hit alignment after the block
    sizes (:func:`fpmcore_vllm_support.dryprobe.engine_plan`).
    """
    return dryprobe.engine_plan(
        model, tp=tp, caching=caching, model_dir=model_dir, build_vllm_config=build_vllm_config,
        build_spec=build_spec, worker_configs=worker_configs, capacity=capacity, resolved=resolved,
    )  # fmt: skip


def plan_summary(p: dryprobe.DryPlan, pool_bytes_per_block: Callable[[Any, Any], int]) -> dict[str, Any]:
    """What vLLM planned, read from its objects (:func:`fpmcore_vllm_support.dryprobe.plan_summary`).

    ``pool_bytes_per_block(vllm_config, groups)`` is the release's ``_pool_bytes_per_block``.
    """
    vc = p.vllm_config
    return dryprobe.plan_summary(
        p,
        pool_page_bytes=pool_bytes_per_block(vc, p.worker_configs[0].kv_cache_groups),
        kv_cache_layout=vc.cache_config.kv_cache_layout,
        mamba_cache_mode=vc.cache_config.mamba_cache_mode,
        startup_blocks=lambda spec: cdiv(spec.max_memory_usage_bytes(vc), spec.page_size_bytes),
    )


def worker_source(
    p: dryprobe.DryPlan, manifest: Mapping[str, Any], rank: int, model_identity: Mapping, digest: str | None = None
) -> dict:
    """What a dry-run worker exposes (:func:`fpmcore_vllm_support.dryprobe.worker_source`), with the planned layer specs."""
    return dryprobe.worker_source(p, manifest, rank, model_identity, digest, extra={"kv_cache_specs": p.layer_specs})

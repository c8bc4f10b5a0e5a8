"""Dry probe on CPU: vLLM 0.33.0's real cache planning for a MODEL.json.

``fpm probe --dry-run MODEL.json -o DIR`` reaches the plugin's ``dry_probe``
(``fpm_dry_probe``), which plans with :func:`plan` and summarizes with
:func:`plan_summary`.  It runs
the engine core's cache planning of vLLM 0.33.0 (``_initialize_kv_caches``:
layout resolution, grouping, ``get_kv_cache_configs``, the scheduler copy,
``update_kv_cache_capacity``, the block-size resolution) and builds the real
``Scheduler`` on the result, for ``tp`` workers that each hold the layer specs
of MODEL.json.  No model is loaded and no KV cache tensor is allocated: the
worker records list the tensor evidence (storages, views, attention groups,
model runner) and the hardware in ``unresolved_fields``, and their
``lifecycle`` says ``measurement: "cache_planned"`` with
``cache_initialized``, ``warmup_completed`` and ``capture_completed``
false.  Everything else is read from vLLM's objects by the observer
(:mod:`fpmcore_vllm033.observe`, through the plugin).  ``fpm import`` accepts such an attempt as
layout-level evidence (``fpmcore.importer``, I-113).

MODEL.json is the format of the vLLM oracle harness (see
``examples/probes/README.md``): ``max_model_len``,
``available_memory_bytes``, ``kv_cache_layout`` or ``supported_layouts``,
``cache``, ``scheduler``, ``layers`` (layer-name templates with a spec
``{"type": <class in vllm.v1.kv_cache_interface>, <fields>}``), and an
optional ``launch`` merged over the default launch (02 §2.2).  The specs are
those of **one** TP rank: shard the shapes for the TP size.

What every vLLM release shares (the CPU environment, the staged model
configuration, the dry-run image, the default launch, the sources the
observer reads, the evidence folder) is :mod:`fpmcore_vllm_support.dryprobe`;
this module holds what touches vLLM 0.33.0's objects: its configuration
options, its spec fields, the engine core's planning calls and the numbers
of the summary only it computes.  vLLM and torch are imported inside the
functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from fpmcore_vllm_support import dryprobe
from fpmcore_vllm_support.dryprobe import prepare_environment
from fpmcore_vllm_support.encode import cdiv


__all__ = ["build_layer_specs", "build_spec", "build_vllm_config", "plan", "plan_summary", "prepare_environment",
           "worker_source"]  # fmt: skip

#: vLLM's default layout preference when MODEL.json pins none.
DEFAULT_LAYOUTS = ("LBNHC", "LBHNC", "BLNHC", "BLHNC", "BHLNC", "LHBNC")

#: The ``cache`` options of MODEL.json that vLLM 0.33.0's ``CacheConfig`` takes (when not null).
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
#: The ``scheduler`` options of MODEL.json that vLLM 0.33.0's ``SchedulerConfig`` takes.
SCHEDULER_KEYS = (
    "max_num_batched_tokens",
    "max_num_seqs",
    "long_prefill_token_threshold",
    "scheduler_reserve_full_isl",
    "watermark",
    "policy",
)


# --------------------------------------------------------------------------
# MODEL.json → vLLM objects
# --------------------------------------------------------------------------


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


def _convert(cls: type, fields: dict[str, Any], vllm_config: Any) -> None:
    """vLLM 0.33.0's spec fields of MODEL.json: dtype lists, shapes, fractions, enums, ``MultipleOf``, Mamba defaults."""
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
    """A ``KVCacheSpec`` of vLLM 0.33.0 from ``{"type": <class>, <fields>}``."""
    return dryprobe.build_spec(spec_json, vllm_config, convert=_convert)


def build_layer_specs(model: Mapping[str, Any], vllm_config: Any) -> dict[str, Any]:
    """``{layer name: spec}`` in model registration order (:func:`fpmcore.dryprobe.layer_specs`)."""
    return dryprobe.layer_specs(model, vllm_config, build_spec)


def _worker_configs(model: Mapping[str, Any], vllm_config: Any, kv_cache_specs: list[Any], available: int) -> list[Any]:
    """Layout resolution, the global groups and their DCP interleave, then ``get_kv_cache_configs`` for the ranks."""
    from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs

    tp, vc = len(kv_cache_specs), vllm_config
    if model.get("kv_cache_layout"):
        supported = [[model["kv_cache_layout"]]] * tp
    else:
        supported = [list(model.get("supported_layouts") or DEFAULT_LAYOUTS)] * tp
    resolve_kv_cache_layout(vc, supported, [s for specs in kv_cache_specs for s in specs.values()])
    global_groups = get_global_kv_cache_groups(vc, kv_cache_specs)
    vc.adjust_dcp_kv_cache_interleave_size(global_groups)
    configs = get_kv_cache_configs(vc, kv_cache_specs, [available] * tp, global_groups)
    for cfg in configs:
        cfg.kv_cache_layout = vc.cache_config.kv_cache_layout
    return configs  # type: ignore[no-any-return]


def _capacity(vllm_config: Any, scheduler_config: Any) -> None:
    """The engine core's block size (the smallest prefix-cacheable group block) and ``update_kv_cache_capacity``."""
    from vllm.v1.core.kv_cache_utils import update_kv_cache_capacity

    groups = scheduler_config.kv_cache_groups
    if groups:
        participating = [g.kv_cache_spec.block_size for g in groups if g.kv_cache_spec.prefix_cacheable]
        vllm_config.cache_config.block_size = min(participating or [g.kv_cache_spec.block_size for g in groups])
        update_kv_cache_capacity(vllm_config, scheduler_config)


def _resolved(vllm_config: Any, scheduler_config: Any, worker_configs: list[Any], block_sizes: tuple[int, int]) -> None:
    """Every configuration holds the hash block size and the cache-hit alignment."""
    from vllm.v1.core.kv_cache_utils import resolve_cache_hit_alignment_tokens

    block_size, hash_block_size = block_sizes
    alignment = resolve_cache_hit_alignment_tokens(scheduler_config, vllm_config, block_size, hash_block_size)
    for cfg in (*worker_configs, scheduler_config):
        cfg.hash_block_size = hash_block_size
        cfg.cache_hit_alignment_tokens = alignment


def plan(model: Mapping[str, Any], *, tp: int, caching: bool, model_dir: str) -> dryprobe.DryPlan:
    """The engine core's cache planning of vLLM 0.33.0 (vllm/v1/engine/core.py:251-372), on CPU.

    vLLM 0.33.0's steps: layout resolution and the global groups before the
    per-rank configurations, the smallest prefix-cacheable block and
    ``update_kv_cache_capacity``, and the cache-hit alignment after the block
    sizes (:func:`fpmcore_vllm_support.dryprobe.engine_plan`).
    """
    return dryprobe.engine_plan(
        model, tp=tp, caching=caching, model_dir=model_dir, build_vllm_config=build_vllm_config,
        build_spec=build_spec, worker_configs=_worker_configs, capacity=_capacity, resolved=_resolved,
    )  # fmt: skip


def plan_summary(p: dryprobe.DryPlan) -> dict[str, Any]:
    """What vLLM planned, read from its objects (for the command's report; :func:`fpmcore_vllm_support.dryprobe.plan_summary`)."""
    from vllm.v1.core.kv_cache_planning import _pool_bytes_per_block

    vc = p.vllm_config
    return dryprobe.plan_summary(
        p,
        pool_page_bytes=_pool_bytes_per_block(vc, p.worker_configs[0].kv_cache_groups),
        kv_cache_layout=vc.cache_config.kv_cache_layout,
        mamba_cache_mode=vc.cache_config.mamba_cache_mode,
        startup_blocks=lambda spec: cdiv(spec.max_memory_usage_bytes(vc), spec.page_size_bytes),
    )


def worker_source(
    p: dryprobe.DryPlan, manifest: Mapping[str, Any], rank: int, model_identity: Mapping, digest: str | None = None
) -> dict:
    """What a dry-run worker exposes (:func:`fpmcore_vllm_support.dryprobe.worker_source`), with the planned layer specs."""
    return dryprobe.worker_source(p, manifest, rank, model_identity, digest, extra={"kv_cache_specs": p.layer_specs})

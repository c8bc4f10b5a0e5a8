"""Dry probe on CPU: vLLM 0.33.0's real cache planning for a MODEL.json.

``fpm probe --dry-run MODEL.json -o DIR`` calls :func:`dry_probe`.  It runs
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
(:mod:`fpmcore_vllm033.observe`).  ``fpm import`` accepts such an attempt as
layout-level evidence (``fpmcore.importer``, I-113).

The runtime of a dry run is the installed vLLM distribution: the launch's
``deployment.image`` and every record's ``runtime.image`` are
``local/vllm-cpu-dry-run@sha256:<d>`` and ``runtime.source_revision`` is
``<d>``, where ``<d>`` is the SHA-256 of the distribution's ``RECORD`` file
(the hashes of every installed file; the wheel names only a short commit), so
the same installed wheel always gives the same bytes
(:func:`fpmcore.dryprobe.installed_digest`).

MODEL.json is the format of the vLLM oracle harness (see
``examples/probes/README.md``): ``max_model_len``,
``available_memory_bytes``, ``kv_cache_layout`` or ``supported_layouts``,
``cache``, ``scheduler``, ``layers`` (layer-name templates with a spec
``{"type": <class in vllm.v1.kv_cache_interface>, <fields>}``), and an
optional ``launch`` merged over the default launch (02 §2.2).  The specs are
those of **one** TP rank: shard the shapes for the TP size.

MODEL.json reading, the evidence folder and the dry-run image are fpmcore's
own formats, the same for every vLLM release, and live in
:mod:`fpmcore.dryprobe`; this module holds what touches vLLM 0.33.0's
objects: the specs, the engine core's planning calls and the summary.  vLLM
and torch are imported inside the functions.  The process needs
``VLLM_TARGET_DEVICE=cpu`` before vLLM is imported;
:func:`fpmcore.dryprobe.prepare_environment` sets it (and keeps the hub
offline).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from fpmcore import dryprobe
from fpmcore.dryprobe import (  # noqa: F401  (read from this module by the plugin's tests and tools)
    ModelJsonError,
    prepare_environment,
    scheduler_source,
    stub_config_bytes,
)
from fpmcore_vllm033 import observe

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


def _dtype(value: Any) -> Any:
    import torch

    return getattr(torch, dryprobe.dtype_name(value))


def has_mamba(model: Mapping[str, Any]) -> bool:
    return any(entry["spec"]["type"] == "MambaSpec" for entry in model["layers"])


def build_vllm_config(model: Mapping[str, Any], *, tp: int, caching: bool, model_dir: str) -> Any:
    """The engine core's ``VllmConfig`` before cache planning."""
    from vllm.config import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig, VllmConfig

    opts = dryprobe.config_options(model, caching=caching, cache_keys=CACHE_KEYS, scheduler_keys=SCHEDULER_KEYS)
    model_config = ModelConfig(
        model=model_dir,
        skip_tokenizer_init=True,
        max_model_len=opts.max_model_len,
        dtype=model.get("model_dtype", "bfloat16"),
        seed=0,
    )
    if not caching:  # vLLM accepts mamba_block_size only with prefix caching
        opts.cache_kwargs.pop("mamba_block_size", None)
    vllm_config = VllmConfig(
        model_config=model_config,
        cache_config=CacheConfig(**opts.cache_kwargs),
        scheduler_config=SchedulerConfig(**opts.scheduler_kwargs),
        parallel_config=ParallelConfig(tensor_parallel_size=tp),
    )
    if opts.async_scheduling is not None:
        # The CPU platform forces synchronous scheduling; restore the GPU value.
        vllm_config.scheduler_config.async_scheduling = bool(opts.async_scheduling)
    if has_mamba(model):
        # vLLM's own derivation of mamba_cache_mode / mamba_block_size from prefix caching
        from vllm.model_executor.models.config import MambaModelConfig

        MambaModelConfig.verify_and_update_config(vllm_config)
    return vllm_config


def build_spec(spec_json: Mapping[str, Any], vllm_config: Any) -> Any:
    """A ``KVCacheSpec`` of vLLM 0.33.0 from ``{"type": <class>, <fields>}``."""
    from vllm.v1 import kv_cache_interface as kvi
    from vllm.v1.attention.backend import MultipleOf
    from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum

    fields = dict(spec_json)
    type_name = fields.pop("type", None)
    cls = dryprobe.spec_class(kvi, kvi.KVCacheSpec, type_name)
    cc = vllm_config.cache_config
    if "dtype" in fields:
        fields["dtype"] = _dtype(fields["dtype"])
    if "dtypes" in fields:
        fields["dtypes"] = tuple(_dtype(d) for d in fields["dtypes"])
    if "shapes" in fields:
        fields["shapes"] = tuple(tuple(int(x) for x in s) for s in fields["shapes"])
    tps = fields.get("tokens_per_state")
    if isinstance(tps, str) and "/" in tps:
        fields["tokens_per_state"] = Fraction(tps)
    if "mamba_type" in fields:
        fields["mamba_type"] = MambaAttentionBackendEnum[fields["mamba_type"]]
    if "cache_role" in fields:
        fields["cache_role"] = kvi.SparseCacheRole(str(fields["cache_role"]).lower())
    if "kv_quant_mode" in fields:
        fields["kv_quant_mode"] = kvi.KVQuantMode[fields["kv_quant_mode"]]
    bsa = fields.get("block_stride_alignment")
    if isinstance(bsa, Mapping):
        fields["block_stride_alignment"] = MultipleOf(int(bsa["multiple_of"]))
    if issubclass(cls, kvi.MambaSpec):
        # as MambaBase.get_kv_cache_spec: block, padding and mode from the cache config
        if fields.get("block_size", "auto") == "auto":
            fields["block_size"] = cc.mamba_block_size
        if fields.get("page_size_padded", "auto") == "auto":
            fields["page_size_padded"] = cc.mamba_page_size_padded
        if fields.get("mamba_cache_mode", "auto") == "auto":
            fields["mamba_cache_mode"] = cc.mamba_cache_mode
    elif fields.get("block_size", "auto") == "auto":
        fields["block_size"] = cc.block_size
    return dryprobe.construct_spec(cls, type_name, fields)


def build_layer_specs(model: Mapping[str, Any], vllm_config: Any) -> dict[str, Any]:
    """``{layer name: spec}`` in model registration order (:func:`fpmcore.dryprobe.layer_specs`)."""
    return dryprobe.layer_specs(model, lambda spec_json: build_spec(spec_json, vllm_config))


def plan(model: Mapping[str, Any], *, tp: int, caching: bool, model_dir: str) -> dryprobe.DryPlan:
    """The engine core's cache planning of vLLM 0.33.0 (vllm/v1/engine/core.py:251-372), on CPU.

    Returns the engine core's ``vllm_config``, a copy of it as the workers
    hold it before the engine core resolves the block sizes
    (``worker_vllm_config``), the per-rank ``KVCacheConfig`` objects
    (``worker_configs``), the scheduler copy (``scheduler_config``), the real
    ``Scheduler`` and the resolved block sizes.
    """
    prepare_environment()
    from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
    from vllm.v1.core.kv_cache_utils import (
        generate_scheduler_kv_cache_config,
        resolve_cache_hit_alignment_tokens,
        resolve_kv_cache_block_sizes,
        update_kv_cache_capacity,
    )
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs
    from vllm.v1.structured_output import StructuredOutputManager

    vc = build_vllm_config(model, tp=tp, caching=caching, model_dir=model_dir)
    register_all_kvcache_specs(vc)
    layer_specs = build_layer_specs(model, vc)
    kv_cache_specs = [dict(layer_specs) for _ in range(tp)]
    if any(getattr(s, "non_causal", False) for s in layer_specs.values()):
        vc.scheduler_config.enable_chunked_prefill = False
        vc.cache_config.enable_prefix_caching = False
    if model.get("kv_cache_layout"):
        supported = [[model["kv_cache_layout"]]] * tp
    else:
        supported = [list(model.get("supported_layouts") or DEFAULT_LAYOUTS)] * tp
    resolve_kv_cache_layout(vc, supported, [s for specs in kv_cache_specs for s in specs.values()])
    global_groups = get_global_kv_cache_groups(vc, kv_cache_specs)
    vc.adjust_dcp_kv_cache_interleave_size(global_groups)
    available = int(model["available_memory_bytes"])
    worker_configs = get_kv_cache_configs(vc, kv_cache_specs, [available] * tp, global_groups)
    for cfg in worker_configs:
        cfg.kv_cache_layout = vc.cache_config.kv_cache_layout
    worker_vc = copy.deepcopy(vc)  # the workers' copy: the engine core's updates below stay in it
    sched_cfg = generate_scheduler_kv_cache_config(worker_configs)
    vc.cache_config.num_gpu_blocks = sched_cfg.num_blocks
    groups = sched_cfg.kv_cache_groups
    if groups:
        participating = [g.kv_cache_spec.block_size for g in groups if g.kv_cache_spec.prefix_cacheable]
        vc.cache_config.block_size = min(participating or [g.kv_cache_spec.block_size for g in groups])
        update_kv_cache_capacity(vc, sched_cfg)
    vc.validate_block_size()
    block_size, hash_block_size = resolve_kv_cache_block_sizes(sched_cfg, vc)
    alignment = resolve_cache_hit_alignment_tokens(sched_cfg, vc, block_size, hash_block_size)
    for cfg in (*worker_configs, sched_cfg):
        cfg.hash_block_size = hash_block_size
        cfg.cache_hit_alignment_tokens = alignment
    scheduler = Scheduler(
        vllm_config=vc,
        kv_cache_config=sched_cfg,
        structured_output_manager=StructuredOutputManager(vc),
        block_size=block_size,
        hash_block_size=hash_block_size,
        log_stats=False,
    )
    return dryprobe.DryPlan(
        vllm_config=vc,
        worker_vllm_config=worker_vc,
        layer_specs=layer_specs,
        worker_configs=worker_configs,
        scheduler_config=sched_cfg,
        scheduler=scheduler,
        available_memory_bytes=available,
        block_size=block_size,
        hash_block_size=hash_block_size,
    )


# --------------------------------------------------------------------------
# launch, sources
# --------------------------------------------------------------------------


def kv_label(kv_cache_dtype: str, model_dtype: str) -> str | None:
    """The profile label of a KV cache dtype (02 I-32)."""
    from fpmcore_vllm033.rules import KV_DTYPE_LABELS

    return dryprobe.kv_label(kv_cache_dtype, model_dtype, KV_DTYPE_LABELS)


def default_launch(
    model: Mapping[str, Any],
    vllm_config: Any,
    *,
    configuration: str,
    tp: int,
    version: str,
    image: str | None = None,
    revision: str = "unpinned",
) -> dict:
    """The launch (02 §2.2) of a dry probe (:func:`fpmcore.dryprobe.default_launch`).

    ``revision`` is the default ``identity.model_revision``: :func:`dry_probe`
    pins it to the SHA-256 of the MODEL.json bytes, the description that was planned.
    """
    from fpmcore_vllm033.rules import KV_DTYPE_LABELS

    return dryprobe.default_launch(
        model, vllm_config, configuration=configuration, tp=tp, version=version,
        image=image, revision=revision, kv_labels=KV_DTYPE_LABELS,
    )  # fmt: skip


def worker_source(
    p: dryprobe.DryPlan, manifest: Mapping[str, Any], rank: int, model_identity: Mapping, digest: str | None = None
) -> dict:
    """What a dry-run worker exposes (:func:`fpmcore.dryprobe.worker_source`), with the planned layer specs."""
    return dryprobe.worker_source(p, manifest, rank, model_identity, digest, extra={"kv_cache_specs": p.layer_specs})


Observer = Callable[..., dict[str, Any]]


def dry_probe(
    model_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    tp: int = 1,
    caching: bool = True,
    configuration: str | None = None,
    observer: Observer | None = None,
    framework_version: str | None = None,
) -> dict[str, Any]:
    """Plan ``model_path`` for ``tp`` ranks and write the evidence folder ``out_dir`` (02 §2).

    Writes ``observations.json``, ``model-config.json`` (the staged model
    configuration the planning loaded) and, per phase,
    ``<attempt>/<phase>/launch-manifest.json`` and one record per worker rank
    and scheduler (:func:`fpmcore.dryprobe.write_dry_probe`).  ``observer``
    is the record writer (default: this plugin's
    :func:`fpmcore_vllm033.observe.build_record`); ``framework_version`` is
    the version the launch pins (default: the installed vLLM's).  Returns a
    summary of what vLLM planned, per phase.
    """
    prepare_environment()
    import vllm

    version = framework_version or vllm.__version__

    def launch(model: Mapping[str, Any], p: dryprobe.DryPlan, **kw: Any) -> dict:
        return default_launch(model, p.vllm_config, version=version, **kw)

    return dryprobe.write_dry_probe(
        model_path, out_dir, tp=tp, caching=caching, configuration=configuration, plan=plan, launch=launch,
        observer=observer or observe.build_record, summarize=plan_summary, worker_source=worker_source,
    )  # fmt: skip


def plan_summary(p: dryprobe.DryPlan) -> dict[str, Any]:
    """What vLLM planned, read from its objects (for the command's report; :func:`fpmcore.dryprobe.plan_summary`)."""
    from vllm.v1.core.kv_cache_planning import _pool_bytes_per_block

    vc = p.vllm_config
    return dryprobe.plan_summary(
        p,
        pool_page_bytes=_pool_bytes_per_block(vc, p.worker_configs[0].kv_cache_groups),
        kv_cache_layout=vc.cache_config.kv_cache_layout,
        mamba_cache_mode=vc.cache_config.mamba_cache_mode,
        startup_blocks=lambda spec: observe.cdiv(spec.max_memory_usage_bytes(vc), spec.page_size_bytes),
    )

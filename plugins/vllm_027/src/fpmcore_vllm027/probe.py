"""Dry probe on CPU: vLLM 0.27.0's real cache planning for a MODEL.json.

``fpm probe --dry-run MODEL.json -o DIR`` reaches the plugin's ``dry_probe``
through the ``fpm_dry_probe`` hook when the installed runtime is
``vllm==0.27.0``; it plans with :func:`plan` and summarizes with
:func:`plan_summary`.
It runs the engine core's cache planning of vLLM 0.27.0
(``EngineCore._initialize_kv_caches`` in vllm/v1/engine/core.py:
``register_all_kvcache_specs``, ``get_kv_cache_configs``,
``generate_scheduler_kv_cache_config``, ``get_kv_cache_capacity``,
``validate_block_size``, then ``resolve_kv_cache_block_sizes`` and the real
``Scheduler``) for ``tp`` workers that each hold the layer specs of
MODEL.json.  No model is loaded and no KV cache tensor is allocated; the
records are written by the plugin's observer (:mod:`fpmcore_vllm027.observe`) in the
shape of 02 §3.14, with ``lifecycle.measurement`` ``cache_planned`` and the
tensor-level paths in ``unresolved_fields`` (layout-level evidence,
``fpmcore.importer``, I-113).

MODEL.json is the format of ``examples/probes/README.md``; vLLM 0.27.0 knows
no KV cache layouts, so ``kv_cache_layout`` / ``supported_layouts`` are not
read.  The class table of 02 §5.1 allows ``FullAttentionSpec`` and
``SlidingWindowSpec`` only; other spec types are planned by vLLM but refused
by the import (I-41).

What every vLLM release shares (the CPU environment, the staged model
configuration, the dry-run image, the default launch, the sources the
observer reads, the evidence folder) is :mod:`fpmcore_vllm_support.dryprobe`;
this module holds what touches vLLM 0.27.0's objects: its configuration
options, the engine core's planning calls, the summary, and the selection of
vLLM's CPU platform (:func:`prepare_environment`).  vLLM and torch are
imported inside the functions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from fpmcore_vllm_support import dryprobe

__all__ = ["build_layer_specs", "build_spec", "build_vllm_config", "plan", "plan_summary", "prepare_environment"]

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
    return dryprobe.build_vllm_config(
        model, tp=tp, caching=caching, model_dir=model_dir, cache_keys=CACHE_KEYS, scheduler_keys=SCHEDULER_KEYS
    )


def build_spec(spec_json: Mapping[str, Any], vllm_config: Any) -> Any:
    """A ``KVCacheSpec`` of vLLM 0.27.0 from ``{"type": <class>, <fields>}``."""
    return dryprobe.build_spec(spec_json, vllm_config)


def build_layer_specs(model: Mapping[str, Any], vllm_config: Any) -> dict[str, Any]:
    """``{layer name: spec}`` in model registration order (:func:`fpmcore.probe.dry_run.layer_specs`)."""
    return dryprobe.layer_specs(model, vllm_config, build_spec)


def _capacity(vllm_config: Any, scheduler_config: Any) -> None:
    """The engine core's block size (the smallest group block) and capacity (``get_kv_cache_capacity``).

    Without cache groups the engine core turns chunked prefill off.
    """
    from vllm.v1.core.kv_cache_utils import get_kv_cache_capacity

    cc, groups = vllm_config.cache_config, scheduler_config.kv_cache_groups
    if not groups:
        vllm_config.scheduler_config.enable_chunked_prefill = False
        return
    cc.block_size = min(g.kv_cache_spec.block_size for g in groups)
    cc.kv_cache_size_tokens, cc.kv_cache_max_concurrency = get_kv_cache_capacity(vllm_config, scheduler_config)


def _worker_configs(model: Mapping[str, Any], vllm_config: Any, kv_cache_specs: list[Any], available: int) -> list[Any]:
    from vllm.v1.core.kv_cache_utils import get_kv_cache_configs

    return get_kv_cache_configs(vllm_config, kv_cache_specs, [available] * len(kv_cache_specs))  # type: ignore[no-any-return]


def plan(model: Mapping[str, Any], *, tp: int, caching: bool, model_dir: str) -> dryprobe.DryPlan:
    """The engine core's cache planning of vLLM 0.27.0 (``EngineCore.__init__`` / ``_initialize_kv_caches``), on CPU.

    vLLM 0.27.0's steps: ``get_kv_cache_configs`` for the ranks, the smallest
    group block and ``get_kv_cache_capacity``
    (:func:`fpmcore_vllm_support.dryprobe.engine_plan`).
    """
    prepare_environment()  # vLLM's CPU platform before vLLM plans anything
    return dryprobe.engine_plan(
        model, tp=tp, caching=caching, model_dir=model_dir, build_vllm_config=build_vllm_config,
        build_spec=build_spec, worker_configs=_worker_configs, capacity=_capacity,
    )  # fmt: skip


def plan_summary(p: dryprobe.DryPlan) -> dict[str, Any]:
    """What vLLM 0.27.0 planned, read from its objects (for the command's report; :func:`fpmcore_vllm_support.dryprobe.plan_summary`).

    The keys are those of the vLLM 0.33.0 summary; what vLLM 0.27.0 lacks
    (``kv_cache_layout``, ``mamba_cache_mode``, a group's
    ``startup_blocks_per_request``) is ``None``.
    """
    from vllm.v1.core.kv_cache_utils import _pool_bytes_per_block

    groups = p.worker_configs[0].kv_cache_groups
    return dryprobe.plan_summary(p, pool_page_bytes=_pool_bytes_per_block(p.vllm_config, groups) if groups else 0)

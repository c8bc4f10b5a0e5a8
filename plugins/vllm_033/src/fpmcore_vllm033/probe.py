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
what vLLM 0.32.0 and 0.33.0 share (the configuration options, the spec
fields, the engine core's steps around its planning calls) is
:mod:`fpmcore_vllm_support.hybrid_probe`.  This module holds vLLM 0.33.0's
own: the engine core's calls that reach the per-rank configurations (layout
resolution, the global groups and their DCP interleave,
``get_kv_cache_configs`` with the groups) and the module of its pool page.
vLLM and torch are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fpmcore_vllm_support import dryprobe, hybrid_probe
from fpmcore_vllm_support.dryprobe import prepare_environment
from fpmcore_vllm_support.hybrid_probe import build_layer_specs, build_spec, build_vllm_config, worker_source

__all__ = ["build_layer_specs", "build_spec", "build_vllm_config", "plan", "plan_summary", "prepare_environment",
           "worker_source"]  # fmt: skip


def _worker_configs(model: Mapping[str, Any], vllm_config: Any, kv_cache_specs: list[Any], available: int) -> list[Any]:
    """Layout resolution, the global groups and their DCP interleave, then ``get_kv_cache_configs`` for the ranks."""
    from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs

    tp, vc = len(kv_cache_specs), vllm_config
    resolve_kv_cache_layout(
        vc, hybrid_probe.supported_layouts(model, tp), [s for specs in kv_cache_specs for s in specs.values()]
    )
    global_groups = get_global_kv_cache_groups(vc, kv_cache_specs)
    vc.adjust_dcp_kv_cache_interleave_size(global_groups)
    configs = get_kv_cache_configs(vc, kv_cache_specs, [available] * tp, global_groups)
    for cfg in configs:
        cfg.kv_cache_layout = vc.cache_config.kv_cache_layout
    return configs  # type: ignore[no-any-return]


def plan(model: Mapping[str, Any], *, tp: int, caching: bool, model_dir: str) -> dryprobe.DryPlan:
    """The engine core's cache planning of vLLM 0.33.0 (vllm/v1/engine/core.py:251-372), on CPU.

    vLLM 0.33.0's steps: layout resolution and the global groups before the
    per-rank configurations (:func:`_worker_configs`), then the steps it shares
    with 0.32.0 (:func:`fpmcore_vllm_support.hybrid_probe.plan`).
    """
    return hybrid_probe.plan(model, tp=tp, caching=caching, model_dir=model_dir, worker_configs=_worker_configs)


def plan_summary(p: dryprobe.DryPlan) -> dict[str, Any]:
    """What vLLM planned, read from its objects, the pool page from ``kv_cache_planning._pool_bytes_per_block``."""
    from vllm.v1.core.kv_cache_planning import _pool_bytes_per_block

    return hybrid_probe.plan_summary(p, _pool_bytes_per_block)

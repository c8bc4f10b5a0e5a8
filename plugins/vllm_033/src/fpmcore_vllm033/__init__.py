"""fpmcore runtime plugin for vLLM 0.33.0 (``vllm_033``).

It answers for exactly ``vllm==0.33.0`` (02 §4: versions are compared as exact
strings, no PEP 440 normalization) and holds what is specific to that
release: the cache spec class table (02 §5.2) and the import rules of
:mod:`fpmcore_vllm033.rules` (KV dtype labels, the startup reservation of
03 C-1).  vLLM itself is imported only inside the probe-side functions,
never here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fpmcore import API_VERSION, PluginInfo, SpecClassification, hookimpl
from fpmcore.hooktypes import RuntimeRules

from fpmcore_vllm033.classes import classify
from fpmcore_vllm033.rules import RULES

RUNTIME = "vllm==0.33.0"


@hookimpl
def fpm_plugin_info() -> PluginInfo:
    return PluginInfo(
        id="vllm_033",
        kind="runtime",
        targets=(RUNTIME,),
        api_version=API_VERSION,
        summary="vLLM 0.33.0: hybrid cache groups (attention, sliding window, Mamba and ring state)",
    )


@hookimpl
def fpm_classify_spec(runtime: str, spec_class: str, spec: Mapping[str, Any]) -> SpecClassification | None:
    if runtime != RUNTIME:
        return None
    return classify(spec_class)


@hookimpl
def fpm_runtime_rules(runtime: str) -> RuntimeRules | None:
    """Hybrid evidence, KV dtype labels, the §5.1 table, state families and 03 C-1 (:mod:`fpmcore_vllm033.rules`)."""
    return RULES if runtime == RUNTIME else None


@hookimpl
def fpm_observe_cache_groups(
    runtime: str, source: Mapping[str, Any], phase: str, rank: int
) -> dict[str, Any] | None:
    """02 §3: one record from the live vLLM 0.33.0 objects of ``source`` (vLLM imported lazily)."""
    if runtime != RUNTIME:
        return None
    from fpmcore_vllm033.observe import build_record

    return build_record(source, phase=phase, rank=rank)


@hookimpl
def fpm_normalize_record(runtime: str, record: Mapping[str, Any]) -> dict[str, Any] | None:
    """Import side of *observe cache groups*: a vLLM 0.33.0 record in the form the rules read (02 §3)."""
    if runtime != RUNTIME:
        return None
    from fpmcore_vllm033.normalize import normalize

    return normalize(record)


@hookimpl
def fpm_dry_probe(
    runtime: str, model_path: str, out_dir: str, tp: int, caching: bool, configuration: str | None
) -> dict[str, Any] | None:
    """Plan a MODEL.json with vLLM 0.33.0's own cache planning on CPU and write its evidence (02 §2)."""
    if runtime != RUNTIME:
        return None
    from fpmcore_vllm033.probe import dry_probe, prepare_environment

    prepare_environment()
    return dry_probe(model_path, out_dir, tp=tp, caching=caching, configuration=configuration)

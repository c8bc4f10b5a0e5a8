"""fpmcore runtime plugin for vLLM 0.27.0 (``vllm_027``).

vLLM 0.27.0 records carry no hybrid evidence (02 §3.14, §4): only plain
full-attention and sliding-window layouts import, through the class table of
02 §5.1 (:mod:`fpmcore_vllm027.rules`).  vLLM itself is imported only inside probe-side functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fpmcore import API_VERSION, PluginInfo, SpecClassification, hookimpl
from fpmcore.hooktypes import RuntimeRules

from fpmcore_vllm027.rules import OTHER, RULES, TABLE, classify_plain

RUNTIME = "vllm==0.27.0"

__all__ = ["OTHER", "RUNTIME", "TABLE"]  # the observer reads the §5.1 table from here


@hookimpl
def fpm_plugin_info() -> PluginInfo:
    return PluginInfo(
        id="vllm_027",
        kind="runtime",
        targets=(RUNTIME,),
        api_version=API_VERSION,
        summary="vLLM 0.27.0: plain full-attention and sliding-window layouts",
    )


@hookimpl
def fpm_classify_spec(runtime: str, spec_class: str, spec: Mapping[str, Any]) -> SpecClassification | None:
    if runtime != RUNTIME:
        return None
    return classify_plain(spec_class)


@hookimpl
def fpm_runtime_rules(runtime: str) -> RuntimeRules | None:
    """02 §3.14, §5.1, I-32: no hybrid evidence, the plain class table, the KV dtype labels."""
    return RULES if runtime == RUNTIME else None


@hookimpl
def fpm_observe_cache_groups(
    runtime: str, source: Mapping[str, Any], phase: str, rank: int
) -> dict[str, Any] | None:
    """02 §3.14: one record, without hybrid evidence, from live vLLM objects (imported lazily)."""
    if runtime != RUNTIME:
        return None
    from fpmcore_vllm027.observe import build_record

    return build_record(source, phase=phase, rank=rank)


@hookimpl
def fpm_normalize_record(runtime: str, record: Mapping[str, Any]) -> dict[str, Any] | None:
    """Import side of *observe cache groups*: a vLLM 0.27.0 record in the form the rules read (02 §3.14)."""
    if runtime != RUNTIME:
        return None
    from fpmcore_vllm027.normalize import normalize

    return normalize(record)


@hookimpl
def fpm_dry_probe(
    runtime: str, model_path: str, out_dir: str, tp: int, caching: bool, configuration: str | None
) -> dict[str, Any] | None:
    """Plan a MODEL.json with vLLM 0.27.0's own cache planning on CPU and write its evidence (02 §2, §3.14)."""
    if runtime != RUNTIME:
        return None
    from fpmcore_vllm027.probe import dry_probe, prepare_environment

    prepare_environment()
    return dry_probe(model_path, out_dir, tp=tp, caching=caching, configuration=configuration)

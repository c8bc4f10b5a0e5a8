"""Stage M — the profile draft and the import provenance (02 §8, §9.3; I-110).

The draft takes its geometry from the first phase in collection order
(``prefill``); every group gets the **pool page** ``P`` as its page, and
``kv_cache_bytes`` is the minimum over phases and worker ranks of
``free_blocks × P`` (03 C-11).

For layout-level evidence (a dry run, stage B I-113) ``P`` comes from the
planned bytes, and the provenance says so: ``"evidence": "layout"`` (a key
beyond 02 §9.3, present only then), and both provenance texts name the dry run.
"""

from __future__ import annotations

from typing import Any

from fpmcore.documents.errors import FpmError
from fpmcore.documents.profile import resources_of_runtime
from fpmcore.documents.runtime_pin import FRAMEWORK
from fpmcore.importer.block_pool import pool_page
from fpmcore.importer.cache_groups import group_chunk, mamba_group
from fpmcore.importer.prefix_and_capacity import blocks_per_request, phase_geometry_differences
from fpmcore.importer.record_values import canonical
from fpmcore.importer.state import ImportState

RESOURCES_PROVENANCE = (
    "Validated runtime shared-pool observations; minimum usable capacity across compatible phases and ranks, "
    "including padding and permanent reservations."
)
LAYOUT_RESOURCES_PROVENANCE = (
    "Validated layout-level runtime observations (a dry run: the runtime planned the shared pool, no tensors were "
    "allocated); minimum usable capacity across compatible phases and ranks, including padding and permanent "
    "reservations."
)


def rank_capacities(ctx: ImportState) -> list[dict[str, Any]]:
    out = []
    for w in ctx.workers():
        s = ctx.scheduler_for(w)
        free = s.cache["free_blocks"] if s is not None else w.cache["num_blocks"] - 1
        P = pool_page(w)
        d, t, _p = w.rank
        out.append({"phase": w.phase, "dp": d, "tp": t, "free_blocks": free, "pool_page_bytes": P, "bytes": free * P})
    return out


def startup(ctx: ImportState) -> list[dict[str, Any]]:
    if not ctx.hybrid:
        return []
    out = []
    for s in ctx.schedulers():
        st = s.cache["startup"]
        terms = blocks_per_request(ctx, s)
        out.append(
            {
                "phase": s.phase,
                "dp": s.dp,
                "num_blocks": s.cache["num_blocks"],
                "blocks_per_request_by_group": terms,
                "blocks_per_request": sum(terms),
                "max_in_flight_tokens": st["max_in_flight_tokens"],
                "kv_cache_max_concurrency": st["kv_cache_max_concurrency"],
                "kv_cache_size_tokens": st["kv_cache_size_tokens"],
                "checked": True,
            }
        )
    return out


def provenance(ctx: ImportState) -> dict[str, Any]:
    """02 §9.3."""
    first = ctx.ordered()[0]
    runtime = first.data["runtime"]
    return (
        {
            "source": "runtime_observations",
            "schema": "fpmcore-runtime-observation/v1",
            "configuration": ctx.label,
            "attempt_id": ctx.attempt_id,
            "runtime": {
                "framework": runtime["framework"],
                "version": runtime["version"],
                "source_revision": runtime["source_revision"],
            },
            "observer": first.data["observer"],
            "launch": ctx.launch,
            "settings": {p: ctx.workers(p)[0].settings for p in ("prefill", "decode")},
            "prefix_caching": (
                {p: ctx.schedulers(p)[0].data["prefix_caching"] for p in ("prefill", "decode")} if ctx.hybrid else None
            ),
            "phase_geometry_differences": phase_geometry_differences(ctx),
            "rank_capacities": rank_capacities(ctx),
            "startup": startup(ctx),
            "artifacts": ctx.artifacts,
            "runtime_artifacts": ctx.other_artifacts,
            "launch_artifacts": ctx.manifest_refs,
            "observations_index": ctx.index_ref,
        }
        | ({"evidence": "layout"} if ctx.layout else {})
        | ({"runtime_rule_notes": [n.to_json() for n in ctx.notes]} if ctx.notes else {})
    )


def cache_groups(ctx: ImportState) -> list[dict[str, Any]]:
    first = ctx.workers("prefill")[0]
    P = pool_page(first)
    out = []
    for i, g in enumerate(first.groups):
        kind = ctx.kinds[i]
        group: dict[str, Any] = {
            "name": f"runtime_group_{i}",
            "kind": kind,
            "num_layers": len(g["layer_names"]),
            "block_size_tokens": g["block_size_tokens"],
            "page_size_bytes": P,
            "sliding_window": None if kind == "state" else g.get("sliding_window"),
        }
        chunk = group_chunk(ctx, g) if kind == "attention" and ctx.hybrid else None
        if chunk is not None:
            group["attention_chunk_size"] = chunk
        if kind == "state":
            st = g["state"]
            group["blocks_per_request"] = st["blocks_per_request"]
            if mamba_group(ctx, g):
                group["prefill_checkpoint_blocks"] = st["num_prefill_checkpoint_blocks"]
                if st["num_prefill_checkpoint_blocks"] == 1:
                    group["prefill_checkpoint_alignment"] = st["prefill_checkpoint_alignment"]
        out.append(group)
    return out


def draft(ctx: ImportState, prov: dict[str, Any]) -> dict[str, Any]:
    """The profile draft in file form (01 §9.1 declaration order)."""
    launch = ctx.launch
    identity, topo, precision, col = launch["identity"], launch["topology"], launch["precision"], launch["collection"]
    memory: dict[str, Any] = {
        "kv_cache_bytes": min(r["bytes"] for r in prov["rank_capacities"]),
        "gpu_memory_utilization": float(col["gpu_memory_utilization"]),
        "max_model_len": col["max_model_len"],
        "provenance": canonical(prov),
    }
    if ctx.hybrid:
        pc = ctx.schedulers("prefill")[0].data["prefix_caching"]
        memory["enable_prefix_caching"] = pc["enable_prefix_caching"]
        memory["mamba_cache_mode"] = pc["mamba_cache_mode"]
        memory["hash_block_size_tokens"] = pc["hash_block_size"]
    resources = {
        "runtime_memory": memory,
        "cache_layout": "grouped",
        "cache_groups": cache_groups(ctx),
        **resources_of_runtime(col),
        "provenance": LAYOUT_RESOURCES_PROVENANCE if ctx.layout else RESOURCES_PROVENANCE,
    }
    deployment = {
        "system": identity["gpu"],
        "backend": FRAMEWORK,
        "backend_version": ctx.version,
        **{k: topo[k] for k in ("tp", "pp", "dp", "moe_tp", "moe_ep", "cp")},
        "gemm_quant_mode": precision["gemm_quant_mode"],
        "moe_quant_mode": precision["moe_quant_mode"],
        "fmha_quant_mode": precision["fmha_quant_mode"],
        "comm_quant_mode": precision["comm_quant_mode"],
        "kv_cache_dtype": precision["kvcache_quant_mode"],
        "moe_backend": precision["moe_backend"],
        "attention_backend": precision["attention_backend"],
        "enable_wideep": precision["enable_wideep"],
        "enable_eplb": precision["enable_eplb"],
        "resources": resources,
    }
    return {
        "schema_version": 1,
        "model": identity["model"],
        "model_revision": identity["model_revision"],
        "architecture": identity["architecture"],
        "context_length": col["max_model_len"],
        "num_experts": identity["num_experts"],
        "provenance": (
            f"Runtime probe import of configuration {ctx.label} (vLLM {ctx.version})"
            + (
                "; layout-level evidence: a dry run, the cache was planned and no tensors were allocated"
                if ctx.layout
                else ""
            )
            + "; see resources.runtime_memory.provenance."
        ),
        "deployments": [deployment],
    }


def validate(data: dict[str, Any]) -> tuple[Any, str | None]:
    """I-110: build the profile with :mod:`fpmcore.documents.profile`; return it or the P-rule message."""
    from fpmcore.documents import profile

    try:
        return profile.from_data(data), None
    except FpmError as exc:
        return None, exc.message

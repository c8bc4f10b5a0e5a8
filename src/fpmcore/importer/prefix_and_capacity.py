"""Stages J, K and L.

* J — prefix-caching evidence and scheduler block sizes (02 §7.10: I-90 to I-99);
* K — startup capacity against 03's formulas (02 §7.11: I-100 to I-104);
* L — cross-phase and cross-rank agreement (02 §7.12: I-105 to I-109).

J and K apply to records with hybrid evidence only (02 §3.14).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from typing import Any

from fpmcore.documents.rules_catalogue import checks
from fpmcore.host.stage_hooktypes import HashBlockQuery
from fpmcore.importer import capacity
from fpmcore.importer.block_pool import pool_page
from fpmcore.importer.cache_groups import (
    fields_of,
    group_difference,
    group_startup,
    kinds_of,
    layer_entries,
    limits,
    mamba_group,
    spec_cacheable,
    value_at,
)
from fpmcore.importer.launch_settings import TRIO, settings_difference
from fpmcore.importer.record_values import is_int, is_number, is_pos_int, same, show
from fpmcore.importer.state import Finding, ImportState, Record, Refusal, guarded, per_record

PC_KEYS = {"enable_prefix_caching", "mamba_cache_mode", "hash_block_size"}


def _worker_of(ctx: ImportState, rec: Record) -> Record | None:
    for w in ctx.workers(rec.phase):
        if w.dp == rec.dp:
            return w
    return None


# ==========================================================================
# stage J
# ==========================================================================


@checks("I-90")
def prefix_caching_evidence_complete(ctx: ImportState, rec: Record) -> None:
    """I-90: complete prefix-caching evidence on every record."""
    pc = rec.data.get("prefix_caching")
    ok = (
        isinstance(pc, dict)
        and set(pc) == PC_KEYS
        and isinstance(pc["enable_prefix_caching"], bool)
        and pc["mamba_cache_mode"] in ("none", "align", "all")
        and is_pos_int(pc["hash_block_size"])
    )
    if not ok:
        raise Refusal("I-90", f"runtime observation requires complete prefix-caching evidence: {rec.subject}")


@checks("I-91")
def worker_prefix_evidence_matches_scheduler(ctx: ImportState, rec: Record) -> None:
    """I-91: a worker's evidence equals its scheduler's (the scheduler is authoritative)."""
    if not rec.is_worker:
        return
    s = ctx.scheduler_for(rec)
    if s is not None and not same(rec.data["prefix_caching"], s.data.get("prefix_caching")):
        raise Refusal(
            "I-91",
            f"runtime prefix-caching evidence differs across ranks of {rec.phase}: {s.subject} and {rec.subject}",
        )


@checks("I-92")
def prefix_evidence_matches_settings(ctx: ImportState, rec: Record) -> None:
    """I-92: the evidence equals the resolved cache settings.

    A scheduler's ``cache.mamba_cache_mode`` (the engine core's mode, 02 §3.11) is held to the same
    setting; no other rule reads it.
    """
    pc = rec.data["prefix_caching"]
    for key in ("enable_prefix_caching", "mamba_cache_mode", "hash_block_size"):
        if not same(pc[key], rec.setting("cache", key)):
            raise Refusal("I-92", f"runtime prefix-caching evidence contradicts the resolved cache settings: {key}")
    if not rec.is_worker and not same(rec.cache.get("mamba_cache_mode"), rec.setting("cache", "mamba_cache_mode")):
        raise Refusal(
            "I-92", "runtime prefix-caching evidence contradicts the resolved cache settings: mamba_cache_mode"
        )


@checks("I-93")
def align_mode_needs_prefix_caching(ctx: ImportState, rec: Record) -> None:
    """I-93: align mode needs prefix caching (checked before I-94)."""
    pc = rec.data["prefix_caching"]
    if pc["mamba_cache_mode"] == "align" and not pc["enable_prefix_caching"]:
        raise Refusal("I-93", "mamba cache mode align requires prefix caching")


def has_mamba(ctx: ImportState) -> bool:
    first = ctx.workers()[0]
    return any(ctx.kinds[i] == "state" and mamba_group(ctx, g) for i, g in enumerate(first.groups))


@checks("I-94")
def mamba_mode_derived_from_prefix_caching(ctx: ImportState, rec: Record) -> None:
    """I-94: with Mamba groups, vLLM derives align from prefix caching and none without it."""
    if not has_mamba(ctx):
        return
    pc = rec.data["prefix_caching"]
    on, mode = pc["enable_prefix_caching"], pc["mamba_cache_mode"]
    if (on and mode != "align") or (not on and mode != "none"):
        raise Refusal(
            "I-94",
            f"runtime Mamba cache mode {show(mode)} contradicts enable_prefix_caching={show(on)} for a model with Mamba groups",
        )


def _groups(ctx: ImportState, s: Record) -> list[dict[str, Any]]:
    w = _worker_of(ctx, s)
    return w.groups if w is not None else s.groups


@checks("I-95")
def block_size_setting_is_smallest_cacheable(ctx: ImportState, rec: Record) -> None:
    """I-95 [beyond reference]: the scheduler's ``cache.block_size`` setting is the smallest prefix-cacheable block."""
    if rec.is_worker:
        return
    groups = _groups(ctx, rec)
    sizes = [g["block_size_tokens"] for g in groups if g.get("prefix_cacheable") is True] or [
        g["block_size_tokens"] for g in groups
    ]
    want = min(sizes)
    got = rec.setting("cache", "block_size")
    if got != want:
        raise Refusal(
            "I-95",
            f"scheduler block sizes contradict its cache groups: block_size {show(got)}, expected {want} (the smallest prefix-cacheable group block)",
        )


def scheduler_block(ctx: ImportState, s: Record) -> tuple[int, str]:
    """vLLM's scheduler block size (``resolve_kv_cache_block_sizes``) with its formula text; DCP is 1."""
    groups = _groups(ctx, s)
    if len(groups) <= 1:
        bs = s.setting("cache", "block_size")
        return bs, "settings.cache.block_size"
    sizes = [g["block_size_tokens"] for g in groups]
    return math.lcm(*sizes), f"lcm({', '.join(str(x) for x in sizes)})"


@checks("I-96")
def scheduler_block_size_resolved(ctx: ImportState, rec: Record) -> None:
    """I-96: the scheduler block size is the setting (one group) or the lcm of the group blocks."""
    if rec.is_worker:
        return
    want, formula = scheduler_block(ctx, rec)
    got = rec.cache.get("block_size")
    if not same(got, want):
        raise Refusal(
            "I-96",
            f"scheduler block sizes contradict its cache groups: scheduler block size {show(got)}, expected {formula} = {want}",
        )


@checks("I-97")
def hash_block_size_resolved(ctx: ImportState, rec: Record) -> None:
    """I-97: the hash block size is the one the runtime resolves for the scheduler's groups.

    The resolution is the runtime's (``ImportRules.hash_block_size``, asked
    with a :class:`~fpmcore.host.stage_hooktypes.HashBlockQuery`); an answer that is
    text says why the runtime would not start with these groups.
    """
    if rec.is_worker:
        return
    groups = _groups(ctx, rec)
    query = HashBlockQuery(
        block_sizes=tuple(g["block_size_tokens"] for g in groups),
        prefix_cacheable=tuple(g.get("prefix_cacheable") is True for g in groups),
        layer_specs=tuple((spec.get("class"), fields_of(spec)) for g in groups for _n, spec in layer_entries(g)),
        scheduler_block_size=scheduler_block(ctx, rec)[0],
        enable_prefix_caching=rec.data["prefix_caching"]["enable_prefix_caching"],
        prefix_match_unit=rec.setting("cache", "prefix_match_unit"),
        recorded=rec.cache.get("hash_block_size"),
    )
    want = ctx.runtime_rules.hash_block_size(query)
    got = query.recorded
    msg = "scheduler block sizes contradict its cache groups: "
    if isinstance(want, str):
        raise Refusal("I-97", msg + want)
    if not same(got, want):
        raise Refusal("I-97", msg + f"hash block size {show(got)}, expected {want}")


@checks("I-98")
def evidence_hash_block_is_schedulers(ctx: ImportState, rec: Record) -> None:
    """I-98: the evidence's hash block size is the scheduler's."""
    s = rec if not rec.is_worker else ctx.scheduler_for(rec)
    if s is not None and not same(rec.data["prefix_caching"]["hash_block_size"], s.cache.get("hash_block_size")):
        raise Refusal("I-98", "runtime prefix-caching evidence contradicts the scheduler block sizes")


@checks("I-99")
def cache_hits_aligned(ctx: ImportState, rec: Record) -> None:
    """I-99: cache hits align with every prefix-cacheable compressed spec; the alignment is H or the scheduler block."""
    if rec.is_worker:
        return
    a = rec.cache.get("cache_hit_alignment_tokens")
    h, b = rec.cache.get("hash_block_size"), rec.cache.get("block_size")
    msg = "scheduler block sizes contradict its cache groups: "
    if not is_pos_int(a) or a not in (h, b):
        raise Refusal(
            "I-99",
            msg
            + f"cache-hit alignment {show(a)} is neither the hash block size {show(h)} nor the scheduler block size {show(b)}",
        )
    for g in _groups(ctx, rec):
        for name, spec in layer_entries(g):
            f = fields_of(spec)
            t = f.get("tokens_per_state")
            if spec_cacheable(ctx, spec.get("class"), f) and is_int(t) and t > 1 and a % t:
                raise Refusal(
                    "I-99", msg + f"cache-hit alignment {a} is not a multiple of tokens_per_state {t} of {name}"
                )


STAGE_J = [
    per_record(prefix_caching_evidence_complete),
    per_record(worker_prefix_evidence_matches_scheduler),
    per_record(prefix_evidence_matches_settings),
    per_record(align_mode_needs_prefix_caching),
    per_record(mamba_mode_derived_from_prefix_caching),
    per_record(block_size_setting_is_smallest_cacheable),
    per_record(scheduler_block_size_resolved),
    per_record(hash_block_size_resolved),
    per_record(evidence_hash_block_is_schedulers),
    per_record(cache_hits_aligned),
]


# ==========================================================================
# stage K
# ==========================================================================


def blocks_per_request(ctx: ImportState, s: Record) -> list[int]:
    """C-5 terms of a scheduler: C-1 of each group copy (the recorded count when C-1 cannot be computed)."""
    out = []
    for g in s.groups:
        got = group_startup(ctx, s, g)
        out.append(got[0] if got is not None else g.get("startup_blocks_per_request"))
    return out


def _head(s: Record) -> str:
    return f"{s.phase} scheduler dp{s.dp}"


@checks("I-100")
def concurrency_recorded(ctx: ImportState, rec: Record) -> None:
    """I-100: a positive, finite concurrency is recorded."""
    if rec.is_worker:
        return
    c = rec.cache["startup"].get("kv_cache_max_concurrency")
    if not (is_number(c) and math.isfinite(c) and c > 0):
        raise Refusal("I-100", f"{_head(rec)} lacks a positive kv_cache_max_concurrency")


@checks("I-101")
def max_model_len_and_inflight_tokens_resolved(ctx: ImportState, rec: Record) -> None:
    """I-101: startup ``max_model_len`` and in-flight tokens (C-2) as resolved."""
    if rec.is_worker:
        return
    st = rec.cache["startup"]
    L = rec.setting("model", "max_model_len")
    if not same(st.get("max_model_len"), L):
        raise Refusal("I-101", f"{_head(rec)} records max_model_len {show(st.get('max_model_len'))}, expected {L}")
    T = limits(ctx, rec).in_flight_tokens
    if not same(st.get("max_in_flight_tokens"), T):
        raise Refusal(
            "I-101", f"{_head(rec)} records max_in_flight_tokens {show(st.get('max_in_flight_tokens'))}, expected {T}"
        )
    got = rec.setting("scheduler", "max_in_flight_tokens")
    if not same(got, T):
        raise Refusal(
            "I-101", f"{_head(rec)} records settings.scheduler.max_in_flight_tokens {show(got)}, expected {T}"
        )


@checks("I-102")
def one_full_request_fits(ctx: ImportState, rec: Record) -> None:
    """I-102 [beyond reference]: one request at ``max_model_len`` fits beside the null block (C-10)."""
    if rec.is_worker:
        return
    n, M = rec.cache["num_blocks"], sum(blocks_per_request(ctx, rec))
    if M > n - 1:
        raise Refusal(
            "I-102",
            f"{_head(rec)} pool of {n} blocks cannot hold one request at max_model_len: {M} blocks plus the null block",
        )


@checks("I-103")
def max_concurrency_exact(ctx: ImportState, rec: Record) -> None:
    """I-103: ``kv_cache_max_concurrency == n / M`` exactly (C-5, C-6), sliding windows included."""
    if rec.is_worker:
        return
    n, M = rec.cache["num_blocks"], sum(blocks_per_request(ctx, rec))
    c = rec.cache["startup"]["kv_cache_max_concurrency"]
    if c != capacity.concurrency(n, M):
        raise Refusal(
            "I-103",
            f"{_head(rec)} records kv_cache_max_concurrency {show(c)}, which gives {capacity.blocks_from_concurrency(n, c)} blocks per request, but its cache groups reserve {M}",
        )


@checks("I-104")
def cache_size_tokens_exact(ctx: ImportState, rec: Record) -> None:
    """I-104 [beyond reference]: ``kv_cache_size_tokens == int(c × L)`` (C-7)."""
    if rec.is_worker:
        return
    st = rec.cache["startup"]
    c, L, v = st["kv_cache_max_concurrency"], rec.setting("model", "max_model_len"), st.get("kv_cache_size_tokens")
    want = capacity.size_tokens(c, L)
    if not (is_int(v) and v >= 0) or v != want:
        raise Refusal(
            "I-104", f"{_head(rec)} records kv_cache_size_tokens {show(v)}, but int({show(c)} x {L}) = {want}"
        )


STAGE_K = [
    per_record(concurrency_recorded),
    per_record(max_model_len_and_inflight_tokens_resolved),
    per_record(one_full_request_fits),
    per_record(max_concurrency_exact),
    per_record(cache_size_tokens_exact),
]


# ==========================================================================
# stage L
# ==========================================================================

#: keys of a state group that may differ across phases (I-109)
STATE_PHASE_KEYS = ("block_size_tokens", "state.mamba_cache_mode", "startup_blocks_per_request")


@checks("I-105")
def one_hardware_across_phases(ctx: ImportState) -> Iterator[Finding]:
    """I-105: one hardware across phases and ranks (not for layout-level evidence, which names none)."""
    if ctx.layout:
        return
    ws = ctx.workers()
    for w in ws[1:]:
        if not same(w.data.get("hardware"), ws[0].data.get("hardware")):
            yield w, "I-105", f"observed hardware differs across phases or ranks: {ws[0].subject} and {w.subject}"


@checks("I-106")
def one_worker_setting_across_phases(ctx: ImportState) -> Iterator[Finding]:
    """I-106: one worker setting across phases (trio and block sizes excluded)."""
    a, b = ctx.workers("prefill")[0], ctx.workers("decode")[0]
    key = settings_difference(a.settings, b.settings, TRIO + ("cache.mamba_block_size", "cache.block_size"))
    if key is not None:
        section, _, name = key.partition(".")
        x = a.setting(section, name) if name else a.settings.get(section)
        y = b.setting(section, name) if name else b.settings.get(section)
        yield (
            b,
            "I-106",
            f"effective runtime settings differ across phases: {key} (prefill {show(x)}, decode {show(y)})",
        )


@checks("I-107")
def one_pool_page_across_phases(ctx: ImportState) -> Iterator[Finding]:
    """I-107: one pool page across phases and ranks."""
    ws = ctx.workers()
    P = pool_page(ws[0])
    for w in ws[1:]:
        if pool_page(w) != P:
            yield w, "I-107", f"physical page cost differs across phases or ranks: {P} and {pool_page(w)}"
            return


def strip_state_differences(g: dict[str, Any]) -> dict[str, Any]:
    """A state group without the keys I-109 lets differ across phases."""
    g = copy.deepcopy(g)
    g.pop("block_size_tokens", None)
    g.pop("startup_blocks_per_request", None)
    if isinstance(g.get("state"), dict):
        g["state"].pop("mamba_cache_mode", None)
    if isinstance(g.get("layer_specs"), dict):
        for spec in g["layer_specs"].values():
            if isinstance(spec, dict):
                spec.pop("block_size", None)
                if isinstance(spec.get("fields"), dict):
                    spec["fields"].pop("block_size", None)
                    spec["fields"].pop("mamba_cache_mode", None)
    return g


@checks("I-108")
def group_geometry_agrees_across_phases(ctx: ImportState) -> Iterator[Finding]:
    """I-108 (attention groups) and I-109 (state groups): group geometry agrees across phases."""
    a, b = ctx.workers("prefill")[0], ctx.workers("decode")[0]
    kb = kinds_of(ctx, b)
    for i, (ga, gb) in enumerate(zip(a.groups, b.groups)):
        if kb[i] != ctx.kinds[i]:
            yield (
                b,
                "I-108",
                f"decode: runtime cache group geometry differs from prefill: group {i} kind '{kb[i]}', expected '{ctx.kinds[i]}'",
            )
            return
        state = ctx.kinds[i] == "state"
        if state:
            key = group_difference(strip_state_differences(ga), strip_state_differences(gb))
        else:
            key = group_difference(ga, gb)
        if key is not None:
            rule = "I-109" if state else "I-108"
            yield (
                b,
                rule,
                f"decode: runtime cache group geometry differs from prefill: group {i} {key} {value_at(gb, key)}, expected {value_at(ga, key)}",
            )
            return
    if len(a.groups) != len(b.groups):
        yield (
            b,
            "I-108",
            f"decode: runtime cache group geometry differs from prefill: group {min(len(a.groups), len(b.groups))} group_id, expected {len(a.groups)} groups",
        )


def phase_geometry_differences(ctx: ImportState) -> list[dict[str, Any]]:
    """02 §9.3: the allowed differences of the state groups, by group then key."""
    a, b = ctx.workers("prefill")[0], ctx.workers("decode")[0]
    out = []
    for i, (ga, gb) in enumerate(zip(a.groups, b.groups)):
        if ctx.kinds[i] != "state":
            continue
        for key in STATE_PHASE_KEYS:
            if key == "state.mamba_cache_mode":
                va, vb = (
                    (ga.get("state") or {}).get("mamba_cache_mode"),
                    (gb.get("state") or {}).get("mamba_cache_mode"),
                )
                if "mamba_cache_mode" not in (ga.get("state") or {}) and "mamba_cache_mode" not in (
                    gb.get("state") or {}
                ):
                    continue
            else:
                va, vb = ga.get(key), gb.get(key)
            if not same(va, vb):
                out.append({"group": i, "key": key, "prefill": va, "decode": vb})
    return out


STAGE_L = [
    guarded(one_hardware_across_phases),
    guarded(one_worker_setting_across_phases),
    guarded(one_pool_page_across_phases),
    guarded(group_geometry_agrees_across_phases),
]

"""The replay configuration from a profile (06 R-1) and its refusals (R-2, R-3, R-5).

Besides R-3's refusals, :func:`check_config` refuses the scheduler settings
vLLM refuses at start-up (``max_num_active_seqs`` above ``max_num_seqs``,
``long_prefill_token_threshold`` above ``max_model_len``) and a setting the
runtime release does not have (:class:`~fpmcore.replay.rules.ReplayRules`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fpmcore.documents.errors import FpmError
from fpmcore.documents.runtime_pin import RuntimePin
from fpmcore.replay.model import (
    KIND_CHUNK,
    KIND_CONV,
    KIND_FULL,
    KIND_MAMBA,
    KIND_RING,
    KIND_WINDOW,
    MAX_ARRIVAL_STEP,
    MAX_BYTES,
    MAX_STEPS,
    MAX_TOKENS,
    POLICIES,
    GroupSpec,
    LatencyTable,
    ReplayConfig,
)
from fpmcore.replay.rules import ReplayRules, default_rules
from fpmcore.replay.settings import DEFAULTS, SETTINGS


def group_spec(g: Any) -> GroupSpec:
    """An :class:`GroupSpec` from a profile ``FpmCacheGroup`` (01 §3).

    A ``state`` group with checkpoint fields is a Mamba group, one without a
    ring group (R-4); a Mamba group's ``block_size_tokens`` is its Mamba block.
    """
    if g.kind == "attention" and g.attention_chunk_size is not None:
        kind = KIND_CHUNK
    elif g.kind == "attention":
        kind = KIND_FULL if g.sliding_window is None else KIND_WINDOW
    elif g.kind == "convolution":
        kind = KIND_CONV
    else:
        kind = KIND_RING if g.prefill_checkpoint_blocks is None else KIND_MAMBA
    return GroupSpec(
        name=g.name,
        kind=kind,
        block=g.block_size_tokens,
        page=g.page_size_bytes,
        window=g.sliding_window or g.attention_chunk_size or 0,
        blocks_per_request=g.blocks_per_request or 0,
        checkpoint_blocks=g.prefill_checkpoint_blocks or 0,
        checkpoint_alignment=g.prefill_checkpoint_alignment or 0,
    )


def _r3(msg: str) -> FpmError:
    return FpmError("R-3", msg)


def check_config(cfg: ReplayConfig) -> ReplayConfig:
    """R-3 in its order, then the 2**53 limits of R-2 and R-5; returns ``cfg``."""
    for g in cfg.groups:
        if g.block <= 0 or g.page <= 0 or not g.name.strip():
            raise _r3(
                "replay requires cache groups with a name and positive block_size_tokens and "
                f"page_size_bytes: group {g.name}"
            )
    for field in ("max_num_batched_tokens", "max_num_seqs", "max_model_len"):
        v = getattr(cfg, field)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise _r3(f"replay requires a positive integer {field}: found {json.dumps(v)}")
    _check_settings(cfg)
    w = cfg.watermark
    if not (0.0 <= w < 1.0):
        raise _r3(f"watermark must be in [0, 1): found {w}")
    if not cfg.groups:
        raise _r3("replay requires cache groups with a name and positive block_size_tokens and page_size_bytes: group ")
    block_mode = cfg.block_mode
    if w > 0 and not block_mode:
        raise _r3(f"watermark requires block mode: watermark={w}")
    if cfg.prefix_caching and not block_mode:
        q = cfg.groups[0].page
        bad = next(g for g in cfg.groups if g.page != q)
        raise _r3(
            "prefix-caching replay requires every cache group page to equal the pool page: "
            f"group {bad.name} page {bad.page}, pool page {q}"
        )
    if block_mode and cfg.capacity_bytes % cfg.page != 0:
        raise _r3(f"capacity_bytes {cfg.capacity_bytes} is not a whole number of {cfg.page}-byte pool blocks")
    if cfg.prefix_caching:
        attn = [g for g in cfg.groups if g.kind in (KIND_FULL, KIND_WINDOW, KIND_CONV, KIND_CHUNK)]
        mamba = [g for g in cfg.groups if g.kind == KIND_MAMBA]
        b = attn[0].block if attn else (mamba[0].block if mamba else 0)
        bad_a = next((g for g in attn if g.block != b), None)
        if bad_a is not None:
            raise _r3(
                "prefix-caching replay requires every attention and convolution group to use one block size: "
                f"group {bad_a.name} block {bad_a.block}, block={b}"
            )
        bad_m = next((g for g in mamba if g.block != b), None)
        if cfg.hash_block_size != b or bad_m is not None:
            m = bad_m.block if bad_m is not None else (mamba[0].block if mamba else b)
            raise _r3(
                "prefix-caching replay requires hash_block_size_tokens equal to the block size: "
                f"hash={cfg.hash_block_size}, block={b}, mamba block={m}"
            )
        if mamba and not cfg.enable_chunked_prefill:
            raise _r3(
                "prefix-caching replay with mamba state groups requires chunked prefill: enable_chunked_prefill=false"
            )
    if cfg.prefix_caching and cfg.capacity_bytes // cfg.page >= 2**31 - 1:
        raise _r3(
            f"prefix-caching replay supports at most {2**31 - 2} pool blocks: found {cfg.capacity_bytes // cfg.page}"
        )
    for field in ("max_model_len", "max_num_batched_tokens", "max_num_seqs"):
        if getattr(cfg, field) > MAX_TOKENS:
            raise _r3(f"{field} {getattr(cfg, field)} exceeds the replay limit {MAX_TOKENS}")
    if cfg.capacity_bytes > MAX_BYTES:
        raise FpmError("R-2", f"capacity_bytes {cfg.capacity_bytes} exceeds 2**53 bytes")
    total = 0
    for g in cfg.groups:
        if g.kind in (KIND_RING, KIND_MAMBA):
            total += g.blocks_per_request * g.page
            if total > MAX_BYTES:
                raise FpmError("R-5", f"cache group {g.name}: cache allocation exceeds 2**53 bytes")
    for g in cfg.groups:
        # The largest holding a group can reach must stay a 2**53 byte quantity.
        most = (
            -(-(cfg.max_model_len + max(cfg.max_num_batched_tokens, cfg.token_budget)) // g.block)
            + 3
            + g.blocks_per_request
        )
        if most * g.page > MAX_BYTES:
            raise FpmError("R-2", f"cache group {g.name}: cache allocation exceeds 2**53 bytes")
    return cfg


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_settings(cfg: ReplayConfig) -> None:
    """The scheduler settings: their types and ranges (vLLM's ``SchedulerConfig`` validation) and the runtime's."""
    for field in ("max_num_scheduled_tokens", "max_num_active_seqs"):
        v = getattr(cfg, field)
        if v is not None and (not _int(v) or v <= 0 or v > MAX_TOKENS):
            raise _r3(f"replay requires a positive integer {field}: found {json.dumps(v)}")
    for field in ("max_num_queued_reqs", "max_num_queued_tokens"):
        v = getattr(cfg, field)
        if v is not None and (not _int(v) or v < 0 or v > MAX_TOKENS):
            raise _r3(f"{field} must be an integer >= 0: found {json.dumps(v)}")
    v = cfg.long_prefill_token_threshold
    if not _int(v) or v < 0:
        raise _r3(f"long_prefill_token_threshold must be an integer >= 0: found {json.dumps(v)}")
    if v > cfg.max_model_len:
        raise _r3(f"long_prefill_token_threshold ({v}) cannot be greater than the max_model_len ({cfg.max_model_len})")
    v = cfg.prefill_schedule_interval
    if not _int(v) or v < 1 or v > MAX_ARRIVAL_STEP:
        raise _r3(f"prefill_schedule_interval must be a positive integer: found {json.dumps(v)}")
    if cfg.max_num_active_seqs is not None and cfg.max_num_active_seqs > cfg.max_num_seqs:
        raise _r3(
            f"max_num_active_seqs ({cfg.max_num_active_seqs}) cannot be greater than max_num_seqs ({cfg.max_num_seqs})"
        )
    if cfg.scheduling_policy not in POLICIES:
        raise _r3(f"scheduling_policy must be fcfs or priority: found {json.dumps(cfg.scheduling_policy)}")
    if not _int(cfg.max_steps) or not 1 <= cfg.max_steps <= MAX_STEPS:
        raise _r3(f"max_steps must be a positive integer up to {MAX_STEPS}: found {json.dumps(cfg.max_steps)}")
    if not isinstance(cfg.rules, ReplayRules):
        raise _r3("replay rules must be a ReplayRules value")
    missing = [s.release_name for s in SETTINGS if s.release_name is not None
               and s.release_name not in cfg.rules.settings and getattr(cfg, s.name) != s.default]  # fmt: skip
    if missing:
        raise _r3(f"the {cfg.rules.runtime} scheduler has no {missing[0]}: the replay cannot model it")
    for g in cfg.groups:
        if g.kind == KIND_RING and cfg.rules.no_ring_groups:
            raise _r3(f"the {cfg.rules.runtime} KV cache has no ring state groups: cache group {g.name}")
        if g.kind == KIND_MAMBA and g.checkpoint_blocks and cfg.rules.no_mamba_checkpoints:
            raise _r3(f"the {cfg.rules.runtime} KV cache has no Mamba prefill checkpoint blocks: cache group {g.name}")


def profile_prefix_caching(profile: Any, deployment: int = 0) -> bool:
    """The prefix-caching switch the deployment's runtime recorded (off when it recorded none)."""
    rm = profile.deployments[deployment].resources.runtime_memory
    return bool(rm is not None and rm.enable_prefix_caching)


def runtime_pin(profile: Any, deployment: int = 0) -> str:
    """The runtime pin of a profile's deployment (``vllm==0.33.0``): whose replay rules apply."""
    dep = profile.deployments[deployment]
    return str(RuntimePin(dep.backend_version, dep.backend))


def _settings(given: dict[str, Any]) -> dict[str, Any]:
    """The config's settings: the given ones, the others at their default (:data:`~fpmcore.replay.settings.SETTINGS`)."""
    unknown = [k for k in given if k not in DEFAULTS]
    if unknown:
        raise TypeError(f"config_from_profile() got an unexpected keyword argument {unknown[0]!r}")
    return {**DEFAULTS, **given}


def config_from_profile(
    profile: Any,
    deployment: int = 0,
    *,
    max_model_len: int | None = None,
    table: LatencyTable | None = None,
    fixed_step_seconds: float | None = None,
    capacity_bytes: int | None = None,
    rules: ReplayRules | None = None,
    **settings: Any,
) -> ReplayConfig:
    """R-1 defaults from an ``FpmModelProfile``'s deployment, then R-3.

    ``settings`` are the replay's settings by name
    (:data:`fpmcore.replay.settings.SETTINGS`: each an ``fpm replay`` option
    of the same name, and an ``fpm sweep`` setting); one not given takes its
    default.  ``max_num_seqs`` and ``max_num_batched_tokens`` default to the
    deployment's (its ``max_batch_size`` and ``max_num_tokens``,
    :data:`fpmcore.documents.profile.RUNTIME_SETTINGS`), ``prefix_caching`` to its
    recorded ``runtime_memory.enable_prefix_caching``
    (:func:`profile_prefix_caching`).  Without a table and without
    ``fixed_step_seconds`` every step takes 1.0 s (R-31).  ``rules`` are the
    runtime release's (default :func:`~fpmcore.replay.rules.default_rules`).
    """
    values = _settings(settings)
    dep = profile.deployments[deployment]
    res = dep.resources
    if res.cache_layout != "grouped" or not res.cache_groups:
        raise FpmError("R-1", "replay requires a grouped cache layout with cache groups", f"deployments[{deployment}]")
    rm = res.runtime_memory
    if capacity_bytes is None:
        if rm is None:
            raise FpmError("R-1", "replay requires runtime_memory.kv_cache_bytes", f"deployments[{deployment}]")
        capacity_bytes = rm.kv_cache_bytes
    if max_model_len is None:
        max_model_len = rm.max_model_len if rm is not None else profile.context_length
    groups = tuple(group_spec(g) for g in res.cache_groups)
    for name, value in res.runtime_settings().items():
        if values[name] is None:
            values[name] = value
    prefix_caching = values["prefix_caching"]
    if prefix_caching is None:
        prefix_caching = values["prefix_caching"] = profile_prefix_caching(profile, deployment)
    hash_block = 0
    if prefix_caching:
        if rm is not None and rm.hash_block_size_tokens:
            hash_block = rm.hash_block_size_tokens
        else:
            attn = [g for g in groups if g.kind in (KIND_FULL, KIND_WINDOW, KIND_CONV)]
            hash_block = (attn or list(groups))[0].block
    if table is None and fixed_step_seconds is None:
        fixed_step_seconds = 1.0
    cfg = ReplayConfig(
        groups=groups,
        capacity_bytes=capacity_bytes,
        max_model_len=max_model_len,
        hash_block_size=hash_block,
        fixed_step_seconds=fixed_step_seconds if table is None else None,
        table=table,
        rules=default_rules() if rules is None else rules,
        **values,
    )
    return check_config(cfg)


def make_config(groups: Sequence[GroupSpec], capacity_bytes: int, **kw: Any) -> ReplayConfig:
    """A checked config from groups directly (tests and tools)."""
    if kw.get("prefix_caching") and not kw.get("hash_block_size"):
        attn = [g for g in groups if g.kind in (KIND_FULL, KIND_WINDOW, KIND_CONV)]
        kw["hash_block_size"] = (attn or list(groups))[0].block
    return check_config(ReplayConfig(groups=tuple(groups), capacity_bytes=capacity_bytes, **kw))

"""Capacity arithmetic that the import checks (03: C-1, C-2, C-3, C-5, C-6, C-7, C-10).

Integers everywhere, except C-6 and C-7, which follow vLLM's own IEEE-754
double arithmetic: ``n / M`` is Python's correctly rounded true division and
``int(c × L)`` truncates toward zero.

A spec is described by its short class name and its recorded dataclass
``fields`` (02 §3.7); ``block_size`` is the spec's block size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from fpmcore.importer.values import is_int

FULL_FAMILY = frozenset(
    {"FullAttentionSpec", "MLAAttentionSpec", "HiddenStateCacheSpec", "RSWASpec", "SinkFullAttentionSpec"}
)
WINDOW_FAMILY = frozenset({"SlidingWindowSpec", "SlidingWindowMLASpec"})


def cdiv(a: int, b: int) -> int:
    """``(a + b − 1) // b``, integers only (03 §1)."""
    return -(-a // b)


def short(spec_class: Any) -> str:
    return spec_class.rpartition(".")[2] if isinstance(spec_class, str) else ""


@attrs.frozen
class Limits:
    """The settings C-1 reads: ``L``, ``T`` (C-2), DCP and the cache config's Mamba mode."""

    max_model_len: int
    in_flight_tokens: int
    dcp: int = 1
    mamba_cache_mode: str | None = None


def in_flight_tokens(max_num_batched_tokens: int, pp: int, async_scheduling: bool, model_runner: str | None) -> int:
    """C-2: ``T = max_concurrent_batches × max_num_batched_tokens`` (vllm/config/vllm.py:587-610)."""
    if async_scheduling:
        if model_runner == "v2":
            batches = pp + 1
        elif pp <= 1:
            batches = 2
        else:
            batches = pp
    else:
        batches = pp
    return batches * max_num_batched_tokens


def startup_blocks(cls: str, fields: Mapping[str, Any], block_size: int, lim: Limits) -> tuple[int, str] | None:
    """C-1: the startup reservation of one spec, with the formula text of I-61; ``None`` if unknown.

    ``cls`` is the short class name.  A value this function cannot compute from
    the record (``CrossAttentionSpec``: the encoder budget is not recorded)
    gives ``None``.
    """
    L, T, B = lim.max_model_len, lim.in_flight_tokens, block_size
    if not is_int(B) or B <= 0:
        return None
    if cls in FULL_FAMILY:
        length = L
        if fields.get("dcp_sharded") is True and lim.dcp > 1:
            length = cdiv(L, lim.dcp)
        return cdiv(length, B), f"cdiv({length}, {B})"
    if cls in WINDOW_FAMILY:
        w, extra = fields.get("sliding_window"), fields.get("extra_retained_tokens", 0)
        if not is_int(w) or not is_int(extra):
            return None
        tokens = min(w - 1 + extra + T, L)
        return cdiv(tokens, B) + 1, f"cdiv(min({w} - 1 + {extra} + {T}, {L}), {B}) + 1"
    if cls == "ChunkedLocalAttentionSpec":
        chunk = fields.get("attention_chunk_size")
        if not is_int(chunk):
            return None
        return cdiv(min(chunk + T, L), B), f"cdiv(min({chunk} + {T}, {L}), {B})"
    if cls == "MambaSpec":
        k = fields.get("num_speculative_blocks", 0)
        c = fields.get("num_prefill_checkpoint_blocks", 0)
        if not is_int(k) or not is_int(c):
            return None
        if lim.mamba_cache_mode == "align":
            return 2 + k + c, f"align mode: 2 + {k} speculative + {c} checkpoint"
        return 1 + k, f"mode {lim.mamba_cache_mode}: 1 + {k} speculative"
    if cls == "CircularBufferSpec":
        return 1, "ring buffer: 1"
    if cls == "EncoderOnlyAttentionSpec":
        return 0, "encoder-only: 0"
    if cls == "HiSparseHotSpec":
        n = fields.get("blocks_per_request")
        return (n, f"hot pool: {n}") if is_int(n) else None
    if cls == "HiSparseResidentSpec":
        return cdiv(min(T, L), B), f"cdiv(min({T}, {L}), {B})"
    return None


def concurrency(num_blocks: int, blocks_per_request: int) -> float:
    """C-6: ``n / M`` as vLLM computes it (the null block counted in ``n``)."""
    return num_blocks / blocks_per_request


def size_tokens(max_concurrency: float, max_model_len: int) -> int:
    """C-7: ``int(c × L)``, a double product truncated toward zero."""
    return int(max_concurrency * max_model_len)


def blocks_from_concurrency(num_blocks: int, max_concurrency: float) -> str:
    """I-103's ``<x>``: ``n / c`` as an integer when within 1e-9 relative, else six decimals."""
    x = num_blocks / max_concurrency
    r = round(x)
    if abs(x - r) <= 1e-9 * abs(x):
        return str(r)
    return f"{x:.6f}"

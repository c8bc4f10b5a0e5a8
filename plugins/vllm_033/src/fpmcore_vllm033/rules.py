"""The import rules of vLLM 0.33.0 besides its class table (``fpm_runtime_rules``).

* records with hybrid evidence import (02 §4, I-22);
* KV cache dtype labels (02 I-32; vllm/config/cache.py:44-67, the table every
  vLLM release shares: :data:`fpmcore_vllm_support.rules.KV_DTYPE_LABELS`);
* the class table of records without hybrid evidence (02 §5.1,
  :func:`fpmcore_vllm_support.rules.classify_plain`: two rows of this
  release's own table, :mod:`fpmcore_vllm033.classes`);
* state families, the ``prefix_cacheable`` class rule (02 I-44) and the
  startup reservation of one spec (03 C-1), with the vLLM 0.33.0 source of
  each formula;
* the settings vLLM 0.33.0 leaves ``null`` (I-28), the in-flight batches of
  03 C-2 (:func:`fpmcore_vllm_support.rules.max_concurrent_batches`) and the
  hash block size resolution of I-97.

Spec classes are named as recorded (``vllm.v1.kv_cache_interface.MambaSpec``);
the rules read their short name, as the import asks only about classes that
the class table accepted (I-41).  vLLM is never imported here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fpmcore.hooktypes import HashBlockQuery, StartupLimits, StateFamily
from fpmcore_vllm_support.encode import cdiv
from fpmcore_vllm_support.rules import vllm_rules

VERSION = "0.33.0"

#: 03 C-1: ``FullAttentionSpec`` and its subclasses (vllm/v1/kv_cache_interface.py:643-648).
FULL_FAMILY = frozenset(
    {"FullAttentionSpec", "MLAAttentionSpec", "HiddenStateCacheSpec", "RSWASpec", "SinkFullAttentionSpec"}
)
#: 03 C-1: the window classes (vllm/v1/kv_cache_interface.py:918-955).
WINDOW_FAMILY = frozenset({"SlidingWindowSpec", "SlidingWindowMLASpec"})

_STATE_FAMILY: Mapping[str, StateFamily] = {"MambaSpec": "mamba", "CircularBufferSpec": "ring"}


def _short(spec_class: str) -> str:
    return spec_class.rpartition(".")[2]


def _is_int(value: Any) -> bool:
    """A JSON integer (``true`` is not ``1``)."""
    return isinstance(value, int) and not isinstance(value, bool)


def state_family(spec_class: str) -> StateFamily | None:
    """``"mamba"`` for ``MambaSpec``, ``"ring"`` for ``CircularBufferSpec`` (02 §5.2), else ``None``."""
    return _STATE_FAMILY.get(_short(spec_class))


#: ``prefix_cacheable`` is ``False`` for these classes (vllm/v1/kv_cache_interface.py:493, 526, 999).
#: 02 I-44 names only the ring: the HiSparse classes are refused by I-41 before I-44 runs.
NEVER_CACHEABLE = frozenset({"CircularBufferSpec", "HiSparseHotSpec", "HiSparseResidentSpec"})


def prefix_cacheable(spec_class: str, fields: Mapping[str, Any]) -> bool:
    """02 I-44's class rule, as vLLM 0.33.0's ``prefix_cacheable`` properties give it.

    A ring (and a HiSparse pool) never; ``SlidingWindowMLASpec`` iff not
    ``bounded_replay`` (vllm/v1/kv_cache_interface.py:1028-1029); every other class.
    """
    name = _short(spec_class)
    if name in NEVER_CACHEABLE:
        return False
    if name == "SlidingWindowMLASpec":
        return fields.get("bounded_replay") is not True
    return True


def startup_blocks(
    spec_class: str, fields: Mapping[str, Any], block_size: Any, limits: StartupLimits
) -> tuple[int, str] | None:
    """03 C-1: the startup reservation of one spec, with the formula text of I-61; ``None`` if unknown.

    A value the record does not give (``CrossAttentionSpec``: the encoder
    budget is not recorded; a field of another JSON type) gives ``None``.
    """
    cls = _short(spec_class)
    L, T, B = limits.max_model_len, limits.in_flight_tokens, block_size
    if not _is_int(B) or B <= 0:
        return None
    if cls in FULL_FAMILY:  # vllm/v1/kv_cache_interface.py:643-648
        length = L
        if fields.get("dcp_sharded") is True and limits.dcp > 1:
            length = cdiv(L, limits.dcp)
        return cdiv(length, B), f"cdiv({length}, {B})"
    if cls in WINDOW_FAMILY:  # vllm/v1/kv_cache_interface.py:918-955
        w, extra = fields.get("sliding_window"), fields.get("extra_retained_tokens", 0)
        if not _is_int(w) or not _is_int(extra):
            return None
        tokens = min(w - 1 + extra + T, L)
        return cdiv(tokens, B) + 1, f"cdiv(min({w} - 1 + {extra} + {T}, {L}), {B}) + 1"
    if cls == "ChunkedLocalAttentionSpec":  # vllm/v1/kv_cache_interface.py:864-888
        chunk = fields.get("attention_chunk_size")
        if not _is_int(chunk):
            return None
        return cdiv(min(chunk + T, L), B), f"cdiv(min({chunk} + {T}, {L}), {B})"
    if cls == "MambaSpec":  # vllm/v1/kv_cache_interface.py:1135-1141
        k = fields.get("num_speculative_blocks", 0)
        c = fields.get("num_prefill_checkpoint_blocks", 0)
        if not _is_int(k) or not _is_int(c):
            return None
        if limits.mamba_cache_mode == "align":
            return 2 + k + c, f"align mode: 2 + {k} speculative + {c} checkpoint"
        return 1 + k, f"mode {limits.mamba_cache_mode}: 1 + {k} speculative"
    if cls == "CircularBufferSpec":  # vllm/v1/kv_cache_interface.py:982-985
        return 1, "ring buffer: 1"
    if cls == "EncoderOnlyAttentionSpec":  # vllm/v1/kv_cache_interface.py:1215-1217
        return 0, "encoder-only: 0"
    if cls == "HiSparseHotSpec":  # vllm/v1/kv_cache_interface.py:504-505
        n = fields.get("blocks_per_request")
        return (n, f"hot pool: {n}") if _is_int(n) else None
    if cls == "HiSparseResidentSpec":  # vllm/v1/kv_cache_interface.py:533-545
        return cdiv(min(T, L), B), f"cdiv(min({T}, {L}), {B})"
    return None


def _show(value: Any) -> str:
    """A record value as 02 §1 prints it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    return str(value) if isinstance(value, int) else repr(value)


def hash_block_size(q: HashBlockQuery) -> int | str:
    """I-97: ``resolve_kv_cache_block_sizes``'s hash block size (vllm/v1/core/kv_cache_utils.py:816-918).

    One group: the scheduler block size; with prefix caching on, vLLM does
    not start unless ``prefix_match_unit`` is null or that size (840-858).
    Several groups with prefix caching off, or with a Mamba spec not in align
    mode: the scheduler block size.  Otherwise ``prefix_match_unit`` if set,
    else the gcd of the prefix-cacheable group blocks (of all group blocks
    when none is prefix-cacheable, 885-889), which must divide each of them.
    A text answer says why vLLM would not start.
    """
    bs, pmu = q.scheduler_block_size, q.prefix_match_unit
    if len(q.block_sizes) <= 1:
        if q.enable_prefix_caching and pmu not in (None, bs):
            return f"a single cache group with prefix caching needs prefix_match_unit null or {bs}; got {_show(pmu)}"
        return bs
    not_aligned = any(
        state_family(cls) == "mamba" and fields.get("mamba_cache_mode") != "align"
        for cls, fields in q.layer_specs
        if isinstance(cls, str)
    )
    if not q.enable_prefix_caching or not_aligned:
        return bs
    sizes = [b for b, cacheable in zip(q.block_sizes, q.prefix_cacheable, strict=True) if cacheable] or list(q.block_sizes)
    want = pmu if pmu is not None else math.gcd(*sizes)
    if not _is_int(want) or want <= 0 or any(x % want for x in sizes):
        return (f"hash block size {_show(q.recorded)}, expected a divisor of {', '.join(str(x) for x in sizes)}; "
                f"prefix_match_unit {_show(pmu)} is not one")  # fmt: skip
    return int(want)


RULES = vllm_rules(
    VERSION, hybrid_evidence=True, state_family=state_family, prefix_cacheable=prefix_cacheable,
    startup_blocks=startup_blocks, hash_block_size=hash_block_size,
)

"""The import rules of vLLM 0.33.0 besides its class table (``fpm_runtime_rules``).

* records with hybrid evidence import (02 §4, I-22);
* KV cache dtype labels (02 I-32; vllm/config/cache.py:44-67);
* the class table of records without hybrid evidence (02 §5.1), the two
  rows of this release's own table (:mod:`fpmcore_vllm033.classes`);
* state families, the ``prefix_cacheable`` class rule (02 I-44) and the
  startup reservation of one spec (03 C-1), with the vLLM 0.33.0 source of
  each formula.

Spec classes are named as recorded (``vllm.v1.kv_cache_interface.MambaSpec``);
the rules read their short name, as the import asks only about classes that
the class table accepted (I-41).  vLLM is never imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fpmcore.hooktypes import RuntimeRules, SpecClassification, StartupLimits, StateFamily

from fpmcore_vllm033.classes import MODULE, TABLE

VERSION = "0.33.0"

#: 02 I-32: ``cache.kv_cache_dtype`` → profile KV label (vllm/config/cache.py:44-67).
#: ``auto`` takes the model dtype's label (the import's rule); every other dtype
#: (``nvfp4``, ``int8_per_token_head``, …) has no label.
KV_DTYPE_LABELS: Mapping[str, str] = {
    "bfloat16": "bfloat16",
    "float16": "half",
    "fp8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "fp8_inc": "fp8",
    "fp8_ds_mla": "fp8",
    "fp8_per_token_head": "fp8",
}

#: 02 §5.1: a record without hybrid evidence allows exactly these two classes.
PLAIN_TABLE: Mapping[str, SpecClassification] = {
    f"{MODULE}.{name}": TABLE[name] for name in ("FullAttentionSpec", "SlidingWindowSpec")
}
PLAIN_OTHER = SpecClassification(
    kind="unsupported",
    reason="records without hybrid evidence allow FullAttentionSpec and SlidingWindowSpec",
)

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


def cdiv(a: int, b: int) -> int:
    """``(a + b − 1) // b``, integers only (03 §1)."""
    return -(-a // b)


def classify_plain(spec_class: str) -> SpecClassification:
    """02 §5.1: the class table of a record without hybrid evidence."""
    return PLAIN_TABLE.get(spec_class, PLAIN_OTHER)


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


RULES = RuntimeRules(
    version=VERSION,
    hybrid_evidence=True,
    kv_dtype_labels=KV_DTYPE_LABELS,
    classify_plain=classify_plain,
    state_family=state_family,
    prefix_cacheable=prefix_cacheable,
    startup_blocks=startup_blocks,
)

"""The import rules every vLLM release shares (``ImportRules`` fields its runtime plugins give).

* the KV cache dtype labels of 02 I-32 (:data:`KV_DTYPE_LABELS`);
* 03 C-2's ``max_concurrent_batches`` (:func:`max_concurrent_batches`);
* the class table of records without hybrid evidence, 02 §5.1
  (:func:`classify_plain`);
* the settings vLLM leaves ``null`` where 02 §3.4 types them (:data:`NULLABLE_SETTINGS`, I-28);

and :func:`vllm_rules`, the :class:`~fpmcore.host.stage_hooktypes.ImportRules` of a
release with these filled in.

The releases that write hybrid evidence (vLLM 0.32.0 and 0.33.0) share more:
the state families, the ``prefix_cacheable`` class rule (I-44), the startup
reservation of one spec (03 C-1) and the hash block size resolution (I-97)
are the same code in both (the 0.32.0 plugin's README §1-§2 compares them
function by function), so they live here too, each citing the lines of both
releases (0.32.0 first), and :func:`hybrid_rules` gives the rules of such a
release.

vLLM is never imported here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fpmcore.plugin_api import HashBlockQuery, ImportRules, SpecClassification, StartupLimits, StateFamily, cdiv

#: 02 I-32: ``cache.kv_cache_dtype`` → profile KV label (vLLM 0.33.0's
#: vllm/config/cache.py:44-67; 02 gives this one table and applies it to records
#: of every version).  ``auto`` takes the model dtype's label (the import's
#: rule); every other dtype (``nvfp4``, ``int8_per_token_head``, …) has no label.
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


#: I-28: ``CompilationConfig.max_cudagraph_capture_size`` is declared ``int = None``
#: and stays ``None`` when no graph is captured (vllm/config/compilation.py: 0.33.0
#: line 695, 0.27.0 line 692), so a record holds ``null`` where 02 §3.4 types an integer.
NULLABLE_SETTINGS = frozenset({"compilation.max_cudagraph_capture_size"})


def max_concurrent_batches(pp: int, async_scheduling: bool, model_runner: Any) -> int:
    """03 C-2: ``VllmConfig.max_concurrent_batches`` (vllm/config/vllm.py: 0.33.0 587-597, 0.27.0 540-550).

    ``pp + 1`` with asynchronous scheduling and the V2 model runner
    (``settings.model_runner`` ``"v2"``), 2 with asynchronous scheduling, the
    V1 runner and PP 1, else ``pp``.  A record without the runner (``null``)
    is read as the V1 runner.
    """
    if async_scheduling:
        if model_runner == "v2":
            return pp + 1
        if pp <= 1:
            return 2
    return pp


#: 02 §5.1: the class table of a record without hybrid evidence, whatever its
#: version: exactly these two classes of ``vllm.v1.kv_cache_interface``.
PLAIN_TABLE: Mapping[str, SpecClassification] = {
    "vllm.v1.kv_cache_interface.FullAttentionSpec": SpecClassification(kind="attention"),
    "vllm.v1.kv_cache_interface.SlidingWindowSpec": SpecClassification(kind="attention", windowed=True),
}
#: 02 §5.1: every other class.
PLAIN_OTHER = SpecClassification(
    kind="unsupported",
    reason="records without hybrid evidence allow FullAttentionSpec and SlidingWindowSpec",
)


def classify_plain(spec_class: str) -> SpecClassification:
    """02 §5.1: the class table of a record without hybrid evidence (``ImportRules.classify_plain``)."""
    return PLAIN_TABLE.get(spec_class, PLAIN_OTHER)


def vllm_rules(version: str, **release: Any) -> ImportRules:
    """The :class:`~fpmcore.host.stage_hooktypes.ImportRules` of vLLM ``version``: the shared rules, then the release's own.

    Shared: the KV dtype labels, the §5.1 table of records without hybrid
    evidence, the settings vLLM leaves ``null`` and ``max_concurrent_batches``;
    ``release`` adds or replaces fields (``hybrid_evidence``, ``state_family``,
    ``startup_blocks``, …).
    """
    shared: dict[str, Any] = {
        "kv_dtype_labels": KV_DTYPE_LABELS,
        "classify_plain": classify_plain,
        "nullable_settings": NULLABLE_SETTINGS,
        "in_flight_batches": max_concurrent_batches,
    }
    return ImportRules(version=version, **{**shared, **release})


# --------------------------------------------------------------------------
# the releases with hybrid evidence (vLLM 0.32.0 and 0.33.0)
# --------------------------------------------------------------------------

#: 03 C-1: ``FullAttentionSpec`` and its subclasses (vllm/v1/kv_cache_interface.py: 0.32.0 602-607, 0.33.0 643-648).
FULL_FAMILY = frozenset(
    {"FullAttentionSpec", "MLAAttentionSpec", "HiddenStateCacheSpec", "RSWASpec", "SinkFullAttentionSpec"}
)
#: 03 C-1: the window classes (vllm/v1/kv_cache_interface.py: 0.32.0 887-896, 0.33.0 918-955).
WINDOW_FAMILY = frozenset({"SlidingWindowSpec", "SlidingWindowMLASpec"})

_STATE_FAMILY: Mapping[str, StateFamily] = {"MambaSpec": "mamba", "CircularBufferSpec": "ring"}

#: ``prefix_cacheable`` is ``False`` for these classes (vllm/v1/kv_cache_interface.py: 0.32.0 452, 485, 940;
#: 0.33.0 493, 526, 999).  02 I-44 names only the ring: the HiSparse classes are refused by I-41 before I-44 runs.
NEVER_CACHEABLE = frozenset({"CircularBufferSpec", "HiSparseHotSpec", "HiSparseResidentSpec"})


def _short(spec_class: str) -> str:
    return spec_class.rpartition(".")[2]


def _is_int(value: Any) -> bool:
    """A JSON integer (``true`` is not ``1``)."""
    return isinstance(value, int) and not isinstance(value, bool)


def state_family(spec_class: str) -> StateFamily | None:
    """``"mamba"`` for ``MambaSpec``, ``"ring"`` for ``CircularBufferSpec`` (02 §5.2), else ``None``."""
    return _STATE_FAMILY.get(_short(spec_class))


def prefix_cacheable(spec_class: str, fields: Mapping[str, Any]) -> bool:
    """02 I-44's class rule, as the releases' ``prefix_cacheable`` properties give it.

    A ring (and a HiSparse pool) never; ``SlidingWindowMLASpec`` iff not
    ``bounded_replay`` (vllm/v1/kv_cache_interface.py: 0.32.0 969-970,
    0.33.0 1028-1029); every other class.
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

    ``max_memory_usage_bytes`` of vllm/v1/kv_cache_interface.py, line numbers
    0.32.0 / 0.33.0 at each case.  A value the record does not give
    (``CrossAttentionSpec``: the encoder budget is not recorded; a field of
    another JSON type) gives ``None``.
    """
    cls = _short(spec_class)
    L, T, B = limits.max_model_len, limits.in_flight_tokens, block_size
    if not _is_int(B) or B <= 0:
        return None
    if cls in FULL_FAMILY:  # 602-607 / 643-648
        length = L
        if fields.get("dcp_sharded") is True and limits.dcp > 1:
            length = cdiv(L, limits.dcp)
        return cdiv(length, B), f"cdiv({length}, {B})"
    if cls in WINDOW_FAMILY:  # 887-896 / 918-955
        w, extra = fields.get("sliding_window"), fields.get("extra_retained_tokens", 0)
        if not _is_int(w) or not _is_int(extra):
            return None
        tokens = min(w - 1 + extra + T, L)
        return cdiv(tokens, B) + 1, f"cdiv(min({w} - 1 + {extra} + {T}, {L}), {B}) + 1"
    if cls == "ChunkedLocalAttentionSpec":  # 832-837 / 864-888
        chunk = fields.get("attention_chunk_size")
        if not _is_int(chunk):
            return None
        return cdiv(min(chunk + T, L), B), f"cdiv(min({chunk} + {T}, {L}), {B})"
    if cls == "MambaSpec":  # 1076-1082 / 1135-1141
        k = fields.get("num_speculative_blocks", 0)
        c = fields.get("num_prefill_checkpoint_blocks", 0)
        if not _is_int(k) or not _is_int(c):
            return None
        if limits.mamba_cache_mode == "align":
            return 2 + k + c, f"align mode: 2 + {k} speculative + {c} checkpoint"
        return 1 + k, f"mode {limits.mamba_cache_mode}: 1 + {k} speculative"
    if cls == "CircularBufferSpec":  # 923-926 / 982-985
        return 1, "ring buffer: 1"
    if cls == "EncoderOnlyAttentionSpec":  # 1151-1153 / 1215-1217
        return 0, "encoder-only: 0"
    if cls == "HiSparseHotSpec":  # 463-464 / 504-505
        n = fields.get("blocks_per_request")
        return (n, f"hot pool: {n}") if _is_int(n) else None
    if cls == "HiSparseResidentSpec":  # 492-503 / 533-545
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
    """I-97: ``resolve_kv_cache_block_sizes``'s hash block size (vllm/v1/core/kv_cache_utils.py: 0.32.0 804-906, 0.33.0 816-918).

    One group: the scheduler block size; with prefix caching on, vLLM does
    not start unless ``prefix_match_unit`` is null or that size (0.32.0
    828-846, 0.33.0 840-858).  Several groups with prefix caching off, or
    with a Mamba spec not in align mode: the scheduler block size.  Otherwise
    ``prefix_match_unit`` if set, else the gcd of the prefix-cacheable group
    blocks (of all group blocks when none is prefix-cacheable), which must
    divide each of them.  A text answer says why vLLM would not start.
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
    sizes = [b for b, cacheable in zip(q.block_sizes, q.prefix_cacheable, strict=True) if cacheable] or list(
        q.block_sizes
    )
    want = pmu if pmu is not None else math.gcd(*sizes)
    if not _is_int(want) or want <= 0 or any(x % want for x in sizes):
        return (f"hash block size {_show(q.recorded)}, expected a divisor of {', '.join(str(x) for x in sizes)}; "
                f"prefix_match_unit {_show(pmu)} is not one")  # fmt: skip
    return int(want)


def hybrid_rules(version: str, **release: Any) -> ImportRules:
    """The rules of a vLLM release that writes hybrid evidence (0.32.0, 0.33.0): :func:`vllm_rules` with
    hybrid evidence, :func:`state_family`, :func:`prefix_cacheable`, :func:`startup_blocks` and
    :func:`hash_block_size`; ``release`` adds or replaces fields."""
    shared: dict[str, Any] = {
        "hybrid_evidence": True,
        "state_family": state_family,
        "prefix_cacheable": prefix_cacheable,
        "startup_blocks": startup_blocks,
        "hash_block_size": hash_block_size,
    }
    return vllm_rules(version, **{**shared, **release})

"""The cache spec class table of vLLM 0.33.0 (02 §5.2).

Classes are those of ``vllm/v1/kv_cache_interface.py`` in vLLM 0.33.0.  The
kind follows the ``SingleTypeKVCacheManager`` vLLM registers for the class
(vllm/v1/core/single_type_kv_cache_manager.py): that manager's allocation
behaviour is what the profile kind models.
"""

from __future__ import annotations

from fpmcore import SpecClassification

MODULE = "vllm.v1.kv_cache_interface"

_ATTENTION = SpecClassification(kind="attention")
_WINDOWED = SpecClassification(kind="attention", windowed=True)
_STATE = SpecClassification(kind="state")


def _unsupported(reason: str) -> SpecClassification:
    return SpecClassification(kind="unsupported", reason=reason)


#: short class name -> classification, in the row order of 02 §5.2.
TABLE: dict[str, SpecClassification] = {
    # FullAttentionManager
    "FullAttentionSpec": _ATTENTION,
    "MLAAttentionSpec": _ATTENTION,
    "HiddenStateCacheSpec": _ATTENTION,
    "SinkFullAttentionSpec": _ATTENTION,
    # SlidingWindowManager
    "SlidingWindowSpec": _WINDOWED,
    "SlidingWindowMLASpec": _WINDOWED,
    # MambaManager / CircularBufferManager: a fixed number of blocks per request
    "MambaSpec": _STATE,
    "CircularBufferSpec": _STATE,
    # the group takes the one kind of its inner specs (I-42)
    "UniformTypeKVCacheSpecs": SpecClassification(kind="attention", composite=True),
    "RSWASpec": _unsupported(
        "its manager frees the blocks between the prompt and the decode window, "
        "which no cache kind models"
    ),
    "ChunkedLocalAttentionSpec": _unsupported("chunk-local retention is not a cache kind of the profile"),
    "CrossAttentionSpec": _unsupported("encoder-decoder cross-attention is not modelled"),
    "EncoderOnlyAttentionSpec": _unsupported("vLLM 0.33.0 registers no cache manager for it"),
    "HiSparseHotSpec": _unsupported("HiSparse placement uses a host pool that the profile does not model"),
    "HiSparseResidentSpec": _unsupported(
        "HiSparse placement uses a host pool that the profile does not model"
    ),
    "KpoolTailSpec": _unsupported("not a vLLM 0.33.0 class"),
    "AttentionSpec": _unsupported("abstract spec class"),
    "KVCacheSpec": _unsupported("abstract spec class"),
}

UNKNOWN = _unsupported("class unknown to vLLM 0.33.0")


def classify(spec_class: str) -> SpecClassification:
    """Classify a fully qualified spec class name (``vllm.v1.kv_cache_interface.MambaSpec``).

    A class outside ``vllm.v1.kv_cache_interface`` is unknown to vLLM 0.33.0,
    whatever its short name.
    """
    module, _, name = spec_class.rpartition(".")
    if module != MODULE:
        return UNKNOWN
    return TABLE.get(name, UNKNOWN)

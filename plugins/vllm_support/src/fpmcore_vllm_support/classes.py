"""The cache spec class table of the vLLM releases that write hybrid evidence (02 §5.2).

vLLM 0.32.0 and 0.33.0 have the same spec classes in
``vllm/v1/kv_cache_interface.py`` and register the same
``SingleTypeKVCacheManager`` for each (0.33.0
vllm/v1/core/single_type_kv_cache_manager.py:2656-2730; the 0.32.0 plugin's
README §1 compares them class by class).  The kind follows that manager: its
allocation behaviour is what the profile kind models.  Only the reasons that
name the release differ, so each release builds its table with
:func:`hybrid_class_table`.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from fpmcore.plugin_api import SpecClassification

#: The module every vLLM spec class lives in.
MODULE = "vllm.v1.kv_cache_interface"

_ATTENTION = SpecClassification(kind="attention")
_WINDOWED = SpecClassification(kind="attention", windowed=True)
_CHUNKED = SpecClassification(kind="attention", chunked=True)
_STATE = SpecClassification(kind="state")


def _unsupported(reason: str) -> SpecClassification:
    return SpecClassification(kind="unsupported", reason=reason)


@attrs.frozen
class ClassTable:
    """One release's class table: short class name → classification, and the answer for any other class."""

    table: Mapping[str, SpecClassification]
    unknown: SpecClassification

    def classify(self, spec_class: str) -> SpecClassification:
        """Classify a fully qualified spec class name (``vllm.v1.kv_cache_interface.MambaSpec``).

        A class outside ``vllm.v1.kv_cache_interface`` is unknown to the
        release, whatever its short name.
        """
        module, _, name = spec_class.rpartition(".")
        if module != MODULE:
            return self.unknown
        return self.table.get(name, self.unknown)


def hybrid_class_table(version: str) -> ClassTable:
    """The class table of 02 §5.2 for vLLM ``version``, in its row order; the reasons name the release."""
    table: dict[str, SpecClassification] = {
        # FullAttentionManager
        "FullAttentionSpec": _ATTENTION,
        "MLAAttentionSpec": _ATTENTION,
        "HiddenStateCacheSpec": _ATTENTION,
        "SinkFullAttentionSpec": _ATTENTION,
        # SlidingWindowManager
        "SlidingWindowSpec": _WINDOWED,
        "SlidingWindowMLASpec": _WINDOWED,
        # ChunkedLocalAttentionManager: the blocks before the current chunk are released
        "ChunkedLocalAttentionSpec": _CHUNKED,
        # MambaManager / CircularBufferManager: a fixed number of blocks per request
        "MambaSpec": _STATE,
        "CircularBufferSpec": _STATE,
        # the group takes the one kind of its inner specs (I-42)
        "UniformTypeKVCacheSpecs": SpecClassification(kind="attention", composite=True),
        "RSWASpec": _unsupported(
            "its manager frees the blocks between the prompt and the decode window, which no cache kind models"
        ),
        "CrossAttentionSpec": _unsupported("encoder-decoder cross-attention is not modelled"),
        "EncoderOnlyAttentionSpec": _unsupported(f"vLLM {version} registers no cache manager for it"),
        "HiSparseHotSpec": _unsupported("HiSparse placement uses a host pool that the profile does not model"),
        "HiSparseResidentSpec": _unsupported("HiSparse placement uses a host pool that the profile does not model"),
        "KpoolTailSpec": _unsupported(f"not a vLLM {version} class"),
        "AttentionSpec": _unsupported("abstract spec class"),
        "KVCacheSpec": _unsupported("abstract spec class"),
    }
    return ClassTable(table=table, unknown=_unsupported(f"class unknown to vLLM {version}"))

"""The import rules every vLLM release shares (``RuntimeRules`` fields its runtime plugins give).

* the KV cache dtype labels of 02 I-32 (:data:`KV_DTYPE_LABELS`);
* 03 C-2's ``max_concurrent_batches`` (:func:`max_concurrent_batches`);
* the class table of records without hybrid evidence, 02 §5.1
  (:func:`classify_plain`);
* the settings vLLM leaves ``null`` where 02 §3.4 types them (:data:`NULLABLE_SETTINGS`, I-28);

and :func:`vllm_rules`, the :class:`~fpmcore.hooktypes.RuntimeRules` of a
release with these filled in.

vLLM is never imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fpmcore.hooktypes import RuntimeRules, SpecClassification

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
    """02 §5.1: the class table of a record without hybrid evidence (``RuntimeRules.classify_plain``)."""
    return PLAIN_TABLE.get(spec_class, PLAIN_OTHER)


def vllm_rules(version: str, **release: Any) -> RuntimeRules:
    """The :class:`~fpmcore.hooktypes.RuntimeRules` of vLLM ``version``: the shared rules, then the release's own.

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
    return RuntimeRules(version=version, **{**shared, **release})

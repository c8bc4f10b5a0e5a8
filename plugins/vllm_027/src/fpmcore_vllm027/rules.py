"""The import rules of vLLM 0.27.0 (``fpm_runtime_rules``).

vLLM 0.27.0 records carry no hybrid evidence (02 §3.14, §4), so only the
rules that such records meet are given: the class table of 02 §5.1 and the
KV cache dtype labels of 02 I-32.  State families, the ``prefix_cacheable``
class rule and the startup reservation are read from hybrid evidence only
(I-44, I-61, stages J and K), so the defaults of
:class:`~fpmcore.hooktypes.RuntimeRules` stand.  vLLM is never imported here.
"""

from __future__ import annotations

from collections.abc import Mapping

from fpmcore.hooktypes import RuntimeRules, SpecClassification

VERSION = "0.27.0"

#: 02 §5.1: records without hybrid evidence allow exactly these two classes.
TABLE: Mapping[str, SpecClassification] = {
    "vllm.v1.kv_cache_interface.FullAttentionSpec": SpecClassification(kind="attention"),
    "vllm.v1.kv_cache_interface.SlidingWindowSpec": SpecClassification(kind="attention", windowed=True),
}
OTHER = SpecClassification(
    kind="unsupported",
    reason="records without hybrid evidence allow FullAttentionSpec and SlidingWindowSpec",
)

#: 02 I-32: ``cache.kv_cache_dtype`` → profile KV label; ``auto`` takes the model
#: dtype's label (the import's rule), any other dtype has no label.  02 gives one
#: table, that of vLLM 0.33.0's vllm/config/cache.py:44-67, and applies it to
#: records of every version.
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


def classify_plain(spec_class: str) -> SpecClassification:
    """02 §5.1: the class table of every vLLM 0.27.0 record."""
    return TABLE.get(spec_class, OTHER)


RULES = RuntimeRules(
    version=VERSION,
    hybrid_evidence=False,
    kv_dtype_labels=KV_DTYPE_LABELS,
    classify_plain=classify_plain,
)

"""The import rules of vLLM 0.27.0 (``fpm_runtime_rules``).

vLLM 0.27.0 records carry no hybrid evidence (02 §3.14, §4), so only the
rules that such records meet are given: the class table of 02 §5.1 (also its
``fpm_classify_spec`` answer), the
KV cache dtype labels of 02 I-32 (the table every vLLM release shares), the
settings vLLM 0.27.0 leaves ``null`` (I-28) and ``max_concurrent_batches``
(03 C-2, vllm/config/vllm.py:540-550, the rule vLLM 0.33.0 keeps).  State
families, the ``prefix_cacheable`` class rule, the startup reservation and
the hash block size are read from hybrid evidence only (I-44, I-61, stages J
and K), so the defaults of :class:`~fpmcore.host.stage_hooktypes.ImportRules` stand.
vLLM is never imported here.
"""

from __future__ import annotations

from fpmcore_vllm027 import VERSION as VERSION  # the release the plugin targets: one place
from fpmcore_vllm_support.rules import vllm_rules

#: No hybrid evidence: the shared rules only, the others' defaults.
RULES = vllm_rules(VERSION, hybrid_evidence=False)

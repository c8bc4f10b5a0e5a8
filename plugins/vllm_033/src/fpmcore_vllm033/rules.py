"""The import rules of vLLM 0.33.0 besides its class table (``fpm_runtime_rules``).

* records with hybrid evidence import (02 §4, I-22);
* KV cache dtype labels (02 I-32; vllm/config/cache.py:44-67, the table every
  vLLM release shares: :data:`fpmcore_vllm_support.rules.KV_DTYPE_LABELS`);
* the class table of records without hybrid evidence (02 §5.1,
  :func:`fpmcore_vllm_support.rules.classify_plain`: two rows of this
  release's own table, :mod:`fpmcore_vllm033.classes`);
* state families, the ``prefix_cacheable`` class rule (02 I-44), the startup
  reservation of one spec (03 C-1) and the hash block size resolution of
  I-97: the same code in vLLM 0.32.0 and 0.33.0, so
  :func:`fpmcore_vllm_support.rules.hybrid_rules` gives them (each cites its
  vLLM 0.33.0 lines);
* the settings vLLM 0.33.0 leaves ``null`` (I-28) and the in-flight batches
  of 03 C-2 (:func:`fpmcore_vllm_support.rules.max_concurrent_batches`).

Spec classes are named as recorded (``vllm.v1.kv_cache_interface.MambaSpec``);
the rules read their short name, as the import asks only about classes that
the class table accepted (I-41).  vLLM is never imported here.
"""

from __future__ import annotations

from fpmcore_vllm033 import VERSION as VERSION  # the release the plugin targets: one place
from fpmcore_vllm_support.rules import hybrid_rules

RULES = hybrid_rules(VERSION)

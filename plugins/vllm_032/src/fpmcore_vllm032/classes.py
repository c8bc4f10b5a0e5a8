"""The cache spec class table of vLLM 0.32.0 (02 §5.2 row for row).

vLLM 0.32.0's ``vllm/v1/kv_cache_interface.py`` holds the same classes as
0.33.0's (``KVCacheSpec`` … ``UniformTypeKVCacheSpecs``, classes at lines
165-1225) and ``vllm/v1/core/single_type_kv_cache_manager.py`` registers the
same manager for each (README §1), so the table is
:func:`fpmcore_vllm_support.classes.hybrid_class_table`, its reasons naming 0.32.0.
"""

from __future__ import annotations

from fpmcore_vllm_support.classes import hybrid_class_table

#: The table (``CLASSES.table``), its answer for any other class (``CLASSES.unknown``) and :data:`classify`.
CLASSES = hybrid_class_table("0.32.0")
classify = CLASSES.classify

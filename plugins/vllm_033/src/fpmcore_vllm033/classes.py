"""The cache spec class table of vLLM 0.33.0 (02 §5.2).

Classes are those of ``vllm/v1/kv_cache_interface.py`` in vLLM 0.33.0.  The
kind follows the ``SingleTypeKVCacheManager`` vLLM registers for the class
(vllm/v1/core/single_type_kv_cache_manager.py:2656-2730): that manager's
allocation behaviour is what the profile kind models.  vLLM 0.32.0 has the same
classes and managers, so the table is built by
:func:`fpmcore_vllm_support.classes.hybrid_class_table`, its reasons naming 0.33.0.
"""

from __future__ import annotations

from fpmcore_vllm_support.classes import MODULE, hybrid_class_table

CLASSES = hybrid_class_table("0.33.0")
#: short class name -> classification, in the row order of 02 §5.2.
TABLE = CLASSES.table
#: any other class.
UNKNOWN = CLASSES.unknown
#: fully qualified class name -> classification (a class outside :data:`MODULE` is unknown).
classify = CLASSES.classify

__all__ = ["MODULE", "TABLE", "UNKNOWN", "classify"]

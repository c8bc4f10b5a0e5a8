"""Probe side of *observe cache groups* for vLLM 0.33.0 (02 §3).

The plugin (``fpmcore_vllm033.plugin.build_record``, the
``fpm_observe_cache_groups`` hook) turns the live objects of one vLLM 0.33.0
process into one ``fpmcore-runtime-observation/v1`` record with hybrid
evidence: a worker record (02 §3.6-§3.10) or a scheduler record (02 §3.11).
It reads only what vLLM holds; a value it cannot read is ``null`` and its key
path is listed in ``unresolved_fields`` (02 §3.12).  It never writes a verdict.

The record is assembled by :func:`fpmcore_vllm_support.observe.build_record`
(identity blocks, settings, groups, the scheduler's cache, the ``source``
mapping it reads); what is vLLM 0.33.0's own is here: the files it reads
(:data:`SOURCE_FILES`) and the worker ``cache`` its tensors give
(:data:`worker_cache`: the planned
``KVCacheTensor(size, layers, layer_stride, block_stride, offset)``, the
model runner's attention groups and kernel block sizes, one view per tensor
bound to a layer, whose outermost axis walks the blocks; vLLM 0.32.0 lays
them out the same way, so the reading is
:func:`fpmcore_vllm_support.observe.layer_strided_worker_cache`).

vLLM and torch are imported inside the functions only, so that importing this
module (and the plugin) never needs them.
"""

from __future__ import annotations

from fpmcore_vllm_support import observe

#: The installed vLLM files whose objects the observer reads (02 §3.3): 0.33.0's planning module besides
#: the files every release with hybrid evidence has.
SOURCE_FILES: tuple[str, ...] = observe.source_files("vllm/v1/core/kv_cache_planning.py")


#: The worker ``cache`` (02 §3.6) of vLLM 0.33.0's tensors: the layer-strided
#: ``KVCacheTensor`` plan, the model runner's attention groups and kernel block
#: sizes and one view per tensor bound to a layer, read as vLLM 0.32.0's are.
worker_cache = observe.layer_strided_worker_cache

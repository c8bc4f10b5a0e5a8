"""fpmcore runtime plugin for vLLM 0.33.0 (``vllm_033``).

It targets exactly ``vllm==0.33.0`` (02 §4: versions are compared as exact
strings, no PEP 440 normalization) and holds what is specific to that
release: the cache spec class table (02 §5.2, :mod:`fpmcore_vllm033.classes`),
the import rules of :mod:`fpmcore_vllm033.rules` (startup reservation of
03 C-1, the hash block size of I-97, …), the worker cache its tensors give
(:mod:`fpmcore_vllm033.observe`) and its engine core's planning calls
(:mod:`fpmcore_vllm033.probe`).  The hook implementations and everything
every vLLM release shares come from ``fpmcore-vllm-support``.  vLLM itself is
imported only inside the observer and the probe, never here.
"""

from __future__ import annotations

from fpmcore_vllm_support.plugin import VllmRuntimePlugin

#: The release the plugin targets.
VERSION = "0.33.0"

#: The plugin object the entry point ``vllm_033`` names.
plugin = VllmRuntimePlugin("vllm_033", __name__, "fpmcore-vllm033", VERSION,
                           rules_from="fpmcore_vllm033.rules:RULES", classify_from="fpmcore_vllm033.classes:classify",
                           summary="vLLM 0.33.0: hybrid cache groups (attention, sliding window, Mamba and ring state)",
                           replay_from="fpmcore_vllm033.replay:REPLAY_RULES")  # fmt: skip

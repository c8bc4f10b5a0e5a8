"""fpmcore runtime plugin for vLLM 0.27.0 (``vllm_027``).

vLLM 0.27.0 records carry no hybrid evidence (02 §3.14, §4): only plain
full-attention and sliding-window layouts import, through the class table of
02 §5.1 (:mod:`fpmcore_vllm027.rules`).  The plugin holds what is vLLM
0.27.0's own: that table and its rules, the worker cache its tensors give
(:mod:`fpmcore_vllm027.observe`) and its engine core's planning calls
(:mod:`fpmcore_vllm027.probe`).  The hook implementations and everything
every vLLM release shares come from ``fpmcore-vllm-support``.  vLLM itself is
imported only inside the observer and the probe.
"""

from __future__ import annotations

from fpmcore_vllm_support.plugin import VllmRuntimePlugin

#: The release the plugin targets.
VERSION = "0.27.0"

#: The plugin object the entry point ``vllm_027`` names.
plugin = VllmRuntimePlugin("vllm_027", __name__, "fpmcore-vllm027", VERSION,
                           rules_from="fpmcore_vllm027.rules:RULES",
                           classify_from="fpmcore_vllm_support.rules:classify_plain",
                           summary="vLLM 0.27.0: plain full-attention and sliding-window layouts",
                           replay_from="fpmcore_vllm027.replay:REPLAY_RULES")  # fmt: skip

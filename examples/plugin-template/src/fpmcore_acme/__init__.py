"""fpmcore model plugin for Acme Hybrid 7B (``acme``): a template for third-party plugins.

Acme Hybrid 7B is a made-up hybrid of attention and Mamba layers, served by
vLLM in Mamba align mode without a prefill checkpoint.  This module is what
the entry point names: it holds only the hook implementations, each a few
lines that hand the work to :mod:`fpmcore_acme.rules` (plain functions, easy
to test on their own).  The host calls a model plugin's hooks only for the
model ids its plugin info names, so no hook checks the model.

Hooks implemented (see fpmcore's hook reference):

``fpm_plugin_info``               who the plugin is
``fpm_align_stop``                where the runtime stops a prefill chunk of this model
``fpm_generate_points``           the benchmark points of this model (``fpm plan --model acme-hybrid-7b``)
``fpm_producer_contracts``        the producer contract the plugin owns (the host's default
                                  choice claims the cells of its Engram residency)
``fpm_trace_formats``             Acme's request log as a trace format (``fpm replay --trace acme.log``)

Never import vLLM or torch here: ``fpm --help`` and ``fpm plugins`` must work
without a runtime (the conformance suite checks it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fpmcore.plugin_api import (
    API_VERSION,
    AlignStopQuery,
    PlanLimits,
    PluginInfo,
    PointPlan,
    ProducerContract,
    RuntimePin,
    TraceFormat,
    hookimpl,
)

if TYPE_CHECKING:
    from fpmcore.plugin_api import FpmModelProfile

#: The plugin id (the entry point's name) and the model ids it answers for.
PLUGIN_ID = "acme"
MODEL_IDS = ("acme-hybrid-7b", "acme/Hybrid-7B")

#: Cells whose Engram residency is ``host_offload`` are produced by Acme's eager producer.
CONTRACT = ProducerContract(name="acme_eager", execution_mode="eager", residency="host_offload", label="acme-hybrid-7b")


@hookimpl
def fpm_plugin_info() -> PluginInfo:
    return PluginInfo(
        id=PLUGIN_ID,
        kind="model",
        targets=MODEL_IDS,
        api_version=API_VERSION,
        summary="Acme Hybrid 7B: align stop at block boundaries, prefill/decode points, eager contract",
    )


#: The runtimes whose align split :func:`fpmcore_acme.rules.align_stop` models for this model.
ALIGN_RUNTIMES = (str(RuntimePin("0.33.0")),)


@hookimpl
def fpm_align_stop(runtime: str, query: AlignStopQuery) -> int | None:
    if runtime not in ALIGN_RUNTIMES:
        return None  # a runtime whose align rule this plugin does not model
    from fpmcore_acme.rules import align_stop

    return align_stop(query)


@hookimpl
def fpm_generate_points(profile: FpmModelProfile, deployment: int, limits: PlanLimits) -> PointPlan:
    from fpmcore_acme.rules import generate_points

    return generate_points(limits)


@hookimpl
def fpm_producer_contracts() -> list[ProducerContract]:
    return [CONTRACT]


@hookimpl
def fpm_trace_formats() -> list[TraceFormat]:
    from fpmcore_acme.traces import ACME_LOG

    return [ACME_LOG]

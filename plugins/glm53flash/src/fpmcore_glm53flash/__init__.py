"""fpmcore model plugin for GLM-5.3-Flash (``glm53flash``).

GLM-5.3-Flash is a hybrid of KDA (Mamba-style recurrent state) layers, MLA
attention with a DSA indexer cache and a kpool tail ring, served by vLLM
0.33.0 in Mamba align mode.  This plugin holds its model-specific rules: the
producer contract of its collection cells (05 §6.3, §7), the align-stop rule
(04 §3) and the point list (04 §5-§7).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fpmcore.plugin_api import (
    API_VERSION,
    PluginInfo,
    ProducerContract,
    RuntimePin,
    hookimpl,
    producer_contract_hooks,
)

if TYPE_CHECKING:  # the values of the hooks below, imported when one is called
    from fpmcore.plugin_api import AlignStopQuery, FpmModelProfile, PlanLimits, PointPlan, RuleEntry

SUMMARY = "GLM-5.3-Flash: Mamba align-stop rule, point list, native_graph_policy contract"
MODEL_IDS = ("glm53flash", "zai-org/GLM-5.3-Flash")

#: 05 §6.3: a cell with Engram residency ``none`` and the legacy execution profile ``full`` is produced
#: under this contract (the profile keeps the residency free for other producers, 05 §10).
CONTRACT = ProducerContract(
    name="glm53flash_native_graph_policy",
    execution_mode="native_graph_policy",
    residency="none",
    label="glm-5.3-flash",
    protocol_producer="glm53flash_prefix_scheduler",
    execution_profile="full",
)


@hookimpl
def fpm_plugin_info() -> PluginInfo:
    return PluginInfo(id="glm53flash", kind="model", targets=MODEL_IDS, api_version=API_VERSION, summary=SUMMARY)


# -- 04: align stop and point generation ------------------------------------

#: The runtimes whose Mamba align rule :mod:`fpmcore_glm53flash.align` implements
#: for this model (04 G-1 … G-7: vLLM 0.33.0's scheduler in align mode).
ALIGN_RUNTIMES = (str(RuntimePin("0.33.0")),)


@hookimpl
def fpm_align_stop(runtime: str, query: AlignStopQuery) -> int | None:
    """04 G-1 … G-6: the Mamba align stop of one prefill chunk, on a runtime whose rule this plugin knows."""
    if runtime not in ALIGN_RUNTIMES:
        return None  # no align rule of that runtime is modelled for GLM-5.3-Flash
    from fpmcore_glm53flash.align import align_stop

    return align_stop(query)


@hookimpl
def fpm_generate_points(profile: FpmModelProfile, deployment: int, limits: PlanLimits) -> PointPlan:
    """04 G-9 … G-25: the GLM-5.3-Flash point list of an accepted profile."""
    from fpmcore_glm53flash.planner import generate_points

    return generate_points(profile, deployment, limits)


# -- 05: measurement artifacts ------------------------------------------------

#: Register the contract (claimed for every cell of its residency: the host's default choice) and
#: validate its cells with the rules of :mod:`fpmcore_glm53flash.artifact`.
fpm_producer_contracts, fpm_validate_artifact = producer_contract_hooks(CONTRACT, "fpmcore_glm53flash.artifact:RULES")


# -- the rule ids only this plugin raises (fpm explain) ---------------------


@hookimpl
def fpm_rule_catalogue() -> list[RuleEntry]:
    from fpmcore_glm53flash.catalogue import ENTRIES

    return list(ENTRIES)

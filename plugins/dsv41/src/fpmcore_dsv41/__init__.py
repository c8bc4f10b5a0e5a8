"""fpmcore model plugin for DeepSeek V4.1 (``dsv41``).

DeepSeek V4.1 cells keep their Engram tables sharded over TP in HBM and are
measured eagerly: their producer contract is ``dsv41_eager`` (05 §6.3, §6.4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fpmcore.plugin_api import API_VERSION, PluginInfo, ProducerContract, hookimpl, producer_contract_hooks

if TYPE_CHECKING:  # the value of fpm_rule_catalogue, imported when it is called
    from fpmcore.plugin_api import RuleEntry

SUMMARY = "DeepSeek V4.1: eager producer contract"
MODEL_IDS = ("dsv41", "deepseek-ai/DeepSeek-V4.1")

#: 05 §6.3: a cell with Engram residency ``hbm_tp_sharded`` is produced eagerly.
CONTRACT = ProducerContract(
    name="dsv41_eager", execution_mode="eager", residency="hbm_tp_sharded", label="deepseek-v4.1"
)


@hookimpl
def fpm_plugin_info() -> PluginInfo:
    return PluginInfo(id="dsv41", kind="model", targets=MODEL_IDS, api_version=API_VERSION, summary=SUMMARY)


#: Register the contract (claimed for every cell of its residency: the host's default choice) and
#: validate its cells with the rules of :mod:`fpmcore_dsv41.artifact`.
fpm_producer_contracts, fpm_validate_artifact = producer_contract_hooks(CONTRACT, "fpmcore_dsv41.artifact:RULES")


@hookimpl
def fpm_rule_catalogue() -> list[RuleEntry]:
    """The rule ids only this plugin raises (``fpm explain``)."""
    from fpmcore_dsv41.catalogue import ENTRIES

    return list(ENTRIES)

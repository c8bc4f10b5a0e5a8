"""fpmcore model plugin for DeepSeek V4.1 (``dsv41``).

DeepSeek V4.1 cells keep their Engram tables sharded over TP in HBM and are
measured eagerly: their producer contract is ``dsv41_eager`` (05 §6.3, §6.4).
"""

from __future__ import annotations

from fpmcore import API_VERSION, PluginInfo, ProducerContract, hookimpl

MODEL_IDS = ("dsv41", "deepseek-ai/DeepSeek-V4.1")

#: 05 §6.3: a cell with Engram residency ``hbm_tp_sharded`` is produced eagerly.
CONTRACT = ProducerContract(
    name="dsv41_eager", execution_mode="eager", residency="hbm_tp_sharded", label="deepseek-v4.1"
)


@hookimpl
def fpm_plugin_info() -> PluginInfo:
    return PluginInfo(id="dsv41", kind="model", targets=MODEL_IDS, api_version=API_VERSION,
                      summary="DeepSeek V4.1: eager producer contract")


@hookimpl
def fpm_producer_contracts() -> list[ProducerContract]:
    """05 §6.3: the contract, claimed for every cell of its residency (the host's default choice)."""
    return [CONTRACT]


@hookimpl
def fpm_validate_artifact(contract: ProducerContract, cell: dict, files: dict, plan: dict) -> list | None:
    """05 §6.4, §8: the rules of the ``dsv41_eager`` contract."""
    if contract.name != CONTRACT.name:
        return None
    from fpmcore_dsv41.artifact import validate

    return validate(contract, cell, files, plan)

"""The hooks of a model plugin that owns a producer contract (05 §6.3), written once.

A model plugin that owns one producer contract registers it and validates
the artifacts of its cells with its
:class:`~fpmcore.validate.evaluation.ContractRules`; the host chooses the
contract for every cell of the contract's Engram residency (the default of
``fpm_choose_producer_contract``).  Those hooks are the same for every such
plugin; it takes them from here::

    from fpmcore.validate.contract_hooks import producer_contract_hooks

    CONTRACT = ProducerContract("dsv41_eager", "eager", "hbm_tp_sharded", label="deepseek-v4.1")
    fpm_producer_contracts, fpm_validate_artifact = producer_contract_hooks(CONTRACT, "fpmcore_dsv41.artifact:RULES")

The rules are named as ``"module:attribute"`` and imported when a cell of
the contract is validated first, so that loading the plugin stays cheap
(``fpm --help``).  This module imports nothing heavy itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fpmcore.hookspecs import hookimpl
from fpmcore.host.entry_points import import_object
from fpmcore.host.hooktypes import Diagnostic, ProducerContract


def validate_with_rules(
    rules: Any,
    contract: ProducerContract,
    cell: Mapping[str, Any],
    files: Mapping[str, Any],
    plan: Mapping[str, Any],
    **hook_arguments: Any,
) -> list[Diagnostic]:
    """Rules A-15 … A-40 of a contract cell (05 §8): the general rules plus ``rules``, the first refusal or ``[]``.

    ``hook_arguments`` are ``fpm_validate_artifact``'s ``attempt``, ``owners`` and ``producer``.
    """
    from fpmcore.validate.cell import CellView
    from fpmcore.validate.evaluation import run_rules

    view = CellView.from_hook(contract, cell, files, plan, **hook_arguments)
    if not view.ranks:
        return [
            Diagnostic("A-3", f"native rank artifacts do not cover dp ranks: found []: {view.attempt}", view.attempt)
        ]
    return run_rules(view, rules)


def producer_contract_hooks(contract: ProducerContract, rules: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(fpm_producer_contracts, fpm_validate_artifact)`` of a plugin that owns ``contract``;
    ``rules`` names its ``ContractRules`` as ``"module:attribute"``.

    ``fpm_validate_artifact`` answers ``None`` for any other contract.
    """
    owned = contract

    @hookimpl
    def fpm_producer_contracts() -> list[ProducerContract]:
        return [owned]

    @hookimpl
    def fpm_validate_artifact(
        contract: ProducerContract,
        cell: Mapping[str, Any],
        files: Mapping[str, Any],
        plan: Mapping[str, Any],
        attempt: str,
        owners: Mapping[str, str],
        producer: Mapping[str, Any],
    ) -> list[Diagnostic] | None:
        if contract.name != owned.name:
            return None
        return validate_with_rules(import_object(rules), contract, cell, files, plan, attempt=attempt, owners=owners,
                                   producer=producer)  # fmt: skip

    fpm_producer_contracts.__doc__ = (
        f"05 §6.3: the producer contract {owned.name}, claimed for every cell of residency {owned.residency}."
    )
    fpm_validate_artifact.__doc__ = f"05 §8: the rules of the {owned.name} contract."
    return fpm_producer_contracts, fpm_validate_artifact

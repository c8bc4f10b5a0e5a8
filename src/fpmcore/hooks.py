"""The typed facade over ``pm.hook``: how core code calls plugins.

Each method calls one hook of :mod:`fpmcore.hookspecs` with keyword
arguments, in pluggy's order (last registered first), and checks what each
plugin returned.  A wrong return type, or an exception other than
:class:`~fpmcore.errors.FpmError` (a legitimate refusal, passed through),
becomes a :class:`~fpmcore.errors.PluginError` that names the plugin and the
hook.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from fpmcore.errors import FpmError, PluginError
from fpmcore.hooktypes import (
    AlignStopQuery,
    CliCommand,
    Diagnostic,
    ExecutionIdentity,
    PlanLimits,
    PointPlan,
    ProducerContract,
    RuntimeRules,
    SpecClassification,
)

if TYPE_CHECKING:
    from fpmcore.plugins import PluginHost
    from fpmcore.profile import FpmModelProfile


def _type_name(expected: type | tuple[type, ...]) -> str:
    if isinstance(expected, tuple):
        return " or ".join(t.__name__ for t in expected)
    return expected.__name__


class Hooks:
    """Typed calls of every hook; ``host.hooks`` is the instance of a host."""

    def __init__(self, host: PluginHost) -> None:
        self._host = host

    # -- machinery ------------------------------------------------------------------

    def _results(self, name: str, kwargs: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
        """Yield ``(plugin id, result)`` of every implementation, in call order."""
        caller = getattr(self._host.pm.hook, name)
        for impl in reversed(caller.get_hookimpls()):
            args = [kwargs[a] for a in impl.argnames]
            try:
                value = impl.function(*args)
            except FpmError:
                raise
            except Exception as exc:
                raise PluginError(
                    "plugins", f"plugin '{impl.plugin_name}' failed in {name}: {type(exc).__name__}: {exc}"
                ) from exc
            yield impl.plugin_name, value

    @staticmethod
    def _check(plugin: str, name: str, value: Any, expected: type | tuple[type, ...]) -> Any:
        if not isinstance(value, expected) or isinstance(value, bool) and expected is int:
            raise PluginError(
                "plugins",
                f"plugin '{plugin}' returned {type(value).__name__} from {name}; expected {_type_name(expected)}",
            )
        return value

    def _first(self, name: str, expected: type | tuple[type, ...], **kwargs: Any) -> tuple[str, Any] | None:
        for plugin, value in self._results(name, kwargs):
            if value is not None:
                return plugin, self._check(plugin, name, value, expected)
        return None

    def _collect(self, name: str, expected: type | tuple[type, ...], **kwargs: Any) -> list[tuple[str, Any]]:
        return [
            (plugin, self._check(plugin, name, value, expected))
            for plugin, value in self._results(name, kwargs)
            if value is not None
        ]

    # -- runtime hooks ------------------------------------------------------------------

    def observe_cache_groups(
        self, *, runtime: str, source: Mapping[str, Any], phase: str, rank: int
    ) -> dict[str, Any]:
        """The record of :func:`~fpmcore.hookspecs.fpm_observe_cache_groups`; raises when no plugin observes ``runtime``."""
        hit = self._first("fpm_observe_cache_groups", dict, runtime=runtime, source=source, phase=phase, rank=rank)
        if hit is None:
            raise FpmError("plugins", f"no runtime plugin observes {runtime}")
        return hit[1]

    def dry_probe(
        self, *, runtime: str, model_path: str, out_dir: str, tp: int, caching: bool, configuration: str | None
    ) -> dict[str, Any]:
        """The summary of :func:`~fpmcore.hookspecs.fpm_dry_probe`; raises when no plugin probes ``runtime``."""
        hit = self._first(
            "fpm_dry_probe", dict, runtime=runtime, model_path=model_path, out_dir=out_dir, tp=tp,
            caching=caching, configuration=configuration,
        )  # fmt: skip
        if hit is None:
            raise FpmError("plugins", f"no runtime plugin offers a dry probe for {runtime}")
        return hit[1]

    def normalize_record(self, *, runtime: str, record: Mapping[str, Any]) -> dict[str, Any] | None:
        """The normalized record, or ``None`` when no plugin normalizes records of ``runtime``."""
        hit = self._first("fpm_normalize_record", dict, runtime=runtime, record=record)
        return None if hit is None else hit[1]

    def classify_spec(self, *, runtime: str, spec_class: str, spec: Mapping[str, Any]) -> SpecClassification | None:
        """The classification, or ``None`` when no plugin classifies specs of ``runtime``."""
        hit = self._first("fpm_classify_spec", SpecClassification, runtime=runtime, spec_class=spec_class, spec=spec)
        return None if hit is None else hit[1]

    def runtime_rules(self, *, runtime: str) -> RuntimeRules | None:
        """The :class:`~fpmcore.hooktypes.RuntimeRules` of ``runtime``, or ``None`` when no plugin gives them.

        The rules must be for the pin's version, and their labels strings.  Each
        of their functions is wrapped so that an answer of the wrong type names
        the plugin, like a hook's.  An exception passes through unchanged: the
        functions read record values, and the import turns a value of another
        JSON type into its rule's diagnostic (02 §1).
        """
        hit = self._first("fpm_runtime_rules", RuntimeRules, runtime=runtime)
        if hit is None:
            return None
        plugin, rules = hit
        name = "fpm_runtime_rules"
        version = runtime.rpartition("==")[2]
        if rules.version != version:
            raise PluginError(
                "plugins",
                f"plugin '{plugin}' returned rules for version {rules.version} from {name}; expected {version}",
            )
        for key, label in rules.kv_dtype_labels.items():
            if not isinstance(key, str) or not isinstance(label, str):
                raise PluginError(
                    "plugins", f"plugin '{plugin}' returned a non-string KV dtype label from {name}: {key!r}: {label!r}"
                )

        def guard(field: str, ok: Callable[[Any], bool], expected: str) -> Callable[..., Any]:
            fn = getattr(rules, field)

            def call(*args: Any) -> Any:
                value = fn(*args)
                if not ok(value):
                    raise PluginError(
                        "plugins",
                        f"plugin '{plugin}' returned {type(value).__name__} from {name}.{field}; expected {expected}",
                    )
                return value

            return call

        def startup(v: Any) -> bool:
            return v is None or (
                isinstance(v, tuple) and len(v) == 2 and type(v[0]) is int and isinstance(v[1], str)
            )

        return attrs.evolve(
            rules,
            classify_plain=None if rules.classify_plain is None else guard(
                "classify_plain", lambda v: isinstance(v, SpecClassification), "SpecClassification"),
            state_family=guard("state_family", lambda v: v in (None, "mamba", "ring"), "'mamba', 'ring' or None"),
            prefix_cacheable=guard("prefix_cacheable", lambda v: isinstance(v, bool), "bool"),
            startup_blocks=guard("startup_blocks", startup, "(int, str) or None"),
        )  # fmt: skip

    # -- model hooks ------------------------------------------------------------------

    def align_stop(self, *, model: str, query: AlignStopQuery) -> int:
        """Tokens the runtime schedules of ``query``'s chunk (04 G-6); raises when no plugin answers."""
        hit = self._first("fpm_align_stop", int, model=model, query=query)
        if hit is None:
            raise FpmError("plugins", f"no model plugin implements the align-stop rule for '{model}'")
        plugin, n = hit
        if not 0 <= n <= query.num_new_tokens:
            raise PluginError(
                "plugins",
                f"plugin '{plugin}' returned {n} from fpm_align_stop; expected 0..{query.num_new_tokens}",
            )
        return n

    def align_stop_rule(self, model: str) -> Callable[[AlignStopQuery], int]:
        """The align-stop rule of ``model`` as a function of one query (for loops)."""
        return lambda query: self.align_stop(model=model, query=query)

    def generate_points(
        self, *, model: str, profile: FpmModelProfile, deployment: int, limits: PlanLimits
    ) -> PointPlan:
        """The point plan of ``model``; raises when no plugin plans it."""
        hit = self._first(
            "fpm_generate_points", PointPlan, model=model, profile=profile, deployment=deployment, limits=limits
        )
        if hit is None:
            raise FpmError("plugins", f"no model plugin generates points for '{model}'")
        return hit[1]

    def producer_contracts(self) -> list[tuple[str, ProducerContract]]:
        """``(plugin id, contract)`` of every registered producer contract."""
        found: list[tuple[str, ProducerContract]] = []
        for plugin, contracts in self._collect("fpm_producer_contracts", list):
            for contract in contracts:
                found.append((plugin, self._check(plugin, "fpm_producer_contracts", contract, ProducerContract)))
        return found

    def protocol_owner(self, producer_name: str) -> ProducerContract | None:
        """The registered contract whose ``protocol_producer`` is ``producer_name`` (A-17)."""
        for _plugin, contract in self.producer_contracts():
            if contract.protocol_producer == producer_name:
                return contract
        return None

    def choose_producer_contract(
        self, *, identity: ExecutionIdentity, where: str = ""
    ) -> tuple[str, ProducerContract] | None:
        """``(plugin id, contract)`` of a cell (05 §6.3), or ``None`` without a configuration-bound identity.

        Nobody claiming the residency is A-14; two plugins claiming it is the
        conflict diagnostic of 05 §6.3.
        """
        if not identity.configuration_bound:
            return None
        claims = self._collect("fpm_choose_producer_contract", ProducerContract, identity=identity)
        residency = identity.engram_residency
        if not claims:
            raise FpmError(
                "A-14", f"native execution identity cell has no audited producer contract: {residency}", where
            )
        if len(claims) > 1:
            names = ", ".join(sorted(p for p, _ in claims))
            raise FpmError(
                "A-14", f"producer contract for engram residency {residency} is registered twice: {names}", where
            )
        return claims[0]

    def validate_artifact(
        self,
        *,
        contract: ProducerContract,
        cell: Mapping[str, Any],
        files: Mapping[str, Any],
        plan: Mapping[str, Any],
    ) -> list[Diagnostic]:
        """The diagnostics of a cell under ``contract`` (empty: accepted); raises when no plugin owns it."""
        hit = self._first("fpm_validate_artifact", list, contract=contract, cell=cell, files=files, plan=plan)
        if hit is None:
            raise FpmError("plugins", f"no model plugin validates artifacts of contract {contract.name}")
        plugin, diags = hit
        for d in diags:
            self._check(plugin, "fpm_validate_artifact", d, Diagnostic)
        return diags

    # -- command line -------------------------------------------------------------------

    def cli_commands(self) -> list[tuple[str, CliCommand]]:
        """``(plugin id, command)`` of every subcommand, in registration order (built-ins first)."""
        found: list[tuple[str, CliCommand]] = []
        caller = self._host.pm.hook.fpm_cli_commands
        for impl in caller.get_hookimpls():  # registration order: built-ins first
            try:
                commands = self._check(impl.plugin_name, "fpm_cli_commands", impl.function(), list)
                for command in commands:
                    self._check(impl.plugin_name, "fpm_cli_commands", command, CliCommand)
            except Exception as exc:
                # A plugin whose commands are broken loses its commands, not the CLI.
                if self._host.strict:
                    raise
                self._host.mark_failed(impl.plugin_name, f"fpm_cli_commands: {type(exc).__name__}: {exc}")
                continue
            found.extend((impl.plugin_name, c) for c in commands)
        return found

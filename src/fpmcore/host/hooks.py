"""The typed facade over pluggy: how core code calls plugins.

Every call goes through pluggy: a hook caller of ``pm.hook``, bound to one
plugin with ``pm.subset_hook_caller`` (:meth:`Hooks.caller`), so that
``@hookimpl(wrapper=True)`` and ``hookwrapper`` implementations run around
it and ``pm.trace`` / ``pm.add_hookcall_monitoring`` see it.  Binding a call
to one plugin removes the *other plugins that implement the hook*; plugins
that only wrap it stay in.  Who is called:

* the **runtime hooks** (:class:`RuntimeHooks`, ``host.hooks.runtime(pin)``)
  only the runtime plugin selected once from the exact pin its
  ``PluginInfo.targets`` names (:meth:`fpmcore.host.plugins.PluginHost.select_runtime`);
* the **model hooks** (:class:`ModelHooks`, ``host.hooks.model(model)``)
  only the model plugin selected once from the model id
  (:meth:`fpmcore.host.plugins.PluginHost.select_model`);
* ``fpm_validate_artifact`` each plugin in pluggy's call order until one
  answers (:meth:`Hooks.first`);
* the collecting hooks each plugin in turn (:meth:`Hooks.each`), so that the
  host knows which plugin gave which answer.

So the plugin that answered is always known, and one checker
(:func:`check`, driven by the table :data:`RETURNS`) validates every answer:
a wrong type or value, or an exception other than
:class:`~fpmcore.documents.errors.FpmError` (a legitimate refusal, passed through),
becomes a :class:`~fpmcore.documents.errors.PluginError` that names the plugin and the
hook.  An exception raised by another plugin's wrapper is reported under the
plugin the call was bound to.

Why bound calls: pluggy reports a call's outcome, not which implementation
gave it, and a wrapper the host registered would see the same.  Selecting
the owner first (by pin, by model id) and binding the call to it keeps
pluggy's own dispatch, wrappers and tracing, and makes the answering plugin
known.  For the hooks asked of several plugins in turn (``fpm_validate_artifact``
and the collecting hooks) a wrapper runs once per plugin asked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, cast

import attrs

from fpmcore.documents.errors import FpmError, PluginError
from fpmcore.documents.runtime_pin import RuntimePin
from fpmcore.host.entry_points import import_object
from fpmcore.host.hooktypes import (
    CliCommand,
    Diagnostic,
    ExecutionIdentity,
    PluginInfo,
    ProducerContract,
)
from fpmcore.replay.rules import ReplayRules

if TYPE_CHECKING:
    import pluggy

    from fpmcore.documents.profile import FpmModelProfile
    from fpmcore.documents.rules_catalogue import RuleEntry
    from fpmcore.host.engine_drivers import MeasurementDriver, ServingDriver
    from fpmcore.host.stage_hooktypes import (
        AlignStopQuery,
        EngineLimit,
        EngineRequest,
        ImportRules,
        LiveProbeOptions,
        PlanLimits,
        PointPlan,
        SpecClassification,
    )
    from fpmcore.traces.format import TraceFormat


class _Selected(Protocol):
    @property
    def id(self) -> str: ...


class _Active(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def targets(self) -> tuple[str, ...]: ...


class HostView(Protocol):
    """What the facade needs of its host (:class:`fpmcore.host.plugins.PluginHost`)."""

    pm: pluggy.PluginManager

    def plugin_failed(self, plugin: str, error: str, exc: BaseException) -> None:
        """Record that ``plugin`` broke at run time (``FPM_STRICT_PLUGINS=1``: re-raise ``exc``)."""

    def select_runtime(self, pin: str) -> _Selected: ...

    def active(self, kind: str | None = None) -> Sequence[_Active]: ...

    def select_model(self, model: str) -> _Selected: ...


# --------------------------------------------------------------------------
# what each hook must return: the table and its one checker
# --------------------------------------------------------------------------

#: ``problem(value, name, kwargs)``: what is wrong with an answer of the right
#: type to the call ``name(**kwargs)`` (``"returned … from <name>; expected …"``), or ``None``.
ValueCheck = Callable[[Any, str, Mapping[str, Any]], "str | None"]


@attrs.frozen
class Expect:
    """What one hook (or one function of :class:`~fpmcore.host.stage_hooktypes.ImportRules`) must return.

    ``types`` the accepted types (a ``bool`` is never an ``int``);
    ``text`` how a message names them; ``items`` what each item of a list
    must be; ``problem`` a check of the value beyond its type (see
    :data:`ValueCheck`); ``none`` whether ``None`` is an answer (rules
    functions; a hook's ``None`` always means "no answer").
    """

    types: tuple[type, ...] | Callable[[], tuple[type, ...]]
    text: str = ""
    items: Expect | None = None
    problem: ValueCheck | None = None
    none: bool = False

    @property
    def accepted(self) -> tuple[type, ...]:
        """``types``, or what it returns when it is a function (types of a module imported only when a hook of
        theirs answers, such as the engine drivers of :mod:`fpmcore.host.engine_drivers` and the trace formats)."""
        return self.types if isinstance(self.types, tuple) else self.types()

    @property
    def expected(self) -> str:
        return self.text or " or ".join(t.__name__ for t in self.accepted)


def _is(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def _align_range(n: Any, name: str, kwargs: Mapping[str, Any]) -> str | None:
    k = kwargs["query"].num_new_tokens
    return None if 0 <= n <= k else f"returned {n} from {name}; expected 0..{k}"


def _rules_problem(rules: Any, name: str, kwargs: Mapping[str, Any]) -> str | None:
    from fpmcore.host import stage_hooktypes

    version = RuntimePin.version_of(kwargs["runtime"])
    if rules.version != version:
        return f"returned rules for version {rules.version} from {name}; expected {version}"
    for key, label in rules.kv_dtype_labels.items():
        if not isinstance(key, str) or not isinstance(label, str):
            return f"returned a non-string KV dtype label from {name}: {key!r}: {label!r}"
    for setting in rules.nullable_settings:
        if not isinstance(setting, str) or setting.count(".") > 1:
            return f"returned a nullable setting that is not '<section>.<key>' or '<key>' from {name}: {setting!r}"
    for setting in rules.kv_cache_sizing:
        if setting not in ("cache.kv_cache_memory_bytes", "cache.num_gpu_blocks_override"):
            return f"returned a KV cache sizing setting that I-31 does not read from {name}: {setting!r}"
    if not rules.storage_devices or not all(isinstance(d, str) and d for d in rules.storage_devices):
        return f"returned storage devices that are not non-empty strings from {name}: {rules.storage_devices!r}"
    for key in rules.absent_hardware:
        if key not in stage_hooktypes.HARDWARE_KEYS:
            return f"returned an absent hardware key that is not one of {', '.join(stage_hooktypes.HARDWARE_KEYS)} from {name}: {key!r}"
    for key, label in rules.model_dtype_labels.items():
        if not isinstance(key, str) or not isinstance(label, str):
            return f"returned a non-string model dtype label from {name}: {key!r}: {label!r}"
    return None


def _replay_rules_problem(rules: Any, name: str, kwargs: Mapping[str, Any]) -> str | None:
    if rules.runtime != kwargs["runtime"]:
        return f"returned replay rules of {rules.runtime} from {name}; expected {kwargs['runtime']}"
    return None


def _one_of(*values: str) -> ValueCheck:
    def problem(value: Any, name: str, _kwargs: Mapping[str, Any]) -> str | None:
        return (
            None
            if value in values
            else f"returned {type(value).__name__} from {name}; expected {_join(values)} or None"
        )

    return problem


def _join(values: tuple[str, ...]) -> str:
    return ", ".join(repr(v) for v in values)


def _startup(v: Any, name: str, _kwargs: Mapping[str, Any]) -> str | None:
    ok = len(v) == 2 and type(v[0]) is int and isinstance(v[1], str)
    return None if ok else f"returned tuple from {name}; expected (int, str) or None"


def _positive(v: Any, name: str, _kwargs: Mapping[str, Any]) -> str | None:
    return None if v > 0 else f"returned {v} from {name}; expected a positive int"


def _imported(module: str, name: str) -> Callable[[], tuple[type, ...]]:
    """The type ``name`` of ``module``, imported when a hook it checks answers (the pipeline stages' values of
    :mod:`fpmcore.host.stage_hooktypes`, the engine drivers of :mod:`fpmcore.host.engine_drivers`, the trace
    formats), so that a start of ``fpm`` imports none of them."""

    def types() -> tuple[type, ...]:
        return (cast(type, import_object(f"{module}:{name}")),)

    return types


def _stage(name: str) -> Callable[[], tuple[type, ...]]:
    return _imported("fpmcore.host.stage_hooktypes", name)


#: The ``producer`` argument of ``fpm_validate_artifact`` when the caller names no producer record.
NO_PRODUCER: Mapping[str, str] = {"error": "no expected producer"}

#: The one table of what every hook returns (``None`` always means "no answer").
RETURNS: dict[str, Expect] = {
    "fpm_plugin_info": Expect((PluginInfo,)),
    "fpm_observe_cache_groups": Expect((dict,)),
    "fpm_dry_probe": Expect((dict,)),
    "fpm_live_probe": Expect((dict,)),
    "fpm_normalize_record": Expect((dict,)),
    "fpm_classify_spec": Expect(_stage("SpecClassification")),
    "fpm_runtime_rules": Expect(_stage("ImportRules"), problem=_rules_problem),
    "fpm_measurement_driver": Expect(_imported("fpmcore.host.engine_drivers", "MeasurementDriver")),
    "fpm_serving_engine": Expect(_imported("fpmcore.host.engine_drivers", "ServingDriver")),
    "fpm_engine_limits": Expect((list,), items=Expect(_stage("EngineLimit"))),
    "fpm_replay_rules": Expect((ReplayRules,), "ReplayRules", problem=_replay_rules_problem),
    "fpm_align_stop": Expect((int,), problem=_align_range),
    "fpm_generate_points": Expect(_stage("PointPlan")),
    "fpm_producer_contracts": Expect((list,), items=Expect((ProducerContract,))),
    "fpm_choose_producer_contract": Expect((ProducerContract,)),
    "fpm_validate_artifact": Expect((list,), items=Expect((Diagnostic,))),
    "fpm_cli_commands": Expect((list,), items=Expect((CliCommand,))),
    "fpm_rule_catalogue": Expect((list,), items=Expect(_imported("fpmcore.documents.rules_catalogue", "RuleEntry"))),
    "fpm_trace_formats": Expect((list,), items=Expect(_imported("fpmcore.traces.format", "TraceFormat"))),
}


#: What each function of :class:`~fpmcore.host.stage_hooktypes.ImportRules` returns; the
#: facade checks every answer, naming the plugin and ``fpm_runtime_rules.<function>``.
RULE_RETURNS: dict[str, Expect] = {
    "classify_plain": Expect(_stage("SpecClassification")),
    "state_family": Expect((str,), "'mamba', 'ring' or None", none=True, problem=_one_of("mamba", "ring")),
    "prefix_cacheable": Expect((bool,)),
    "startup_blocks": Expect((tuple,), "(int, str) or None", none=True, problem=_startup),
    "in_flight_batches": Expect((int,), problem=_positive),
    "hash_block_size": Expect((int, str), "int or str"),
}


def check(plugin: str, name: str, value: Any, expect: Expect, kwargs: Mapping[str, Any] | None = None) -> Any:
    """Return ``value`` when it is what ``expect`` asks for, else raise the :class:`PluginError` naming ``plugin`` and ``name``.

    This is the one place answers are validated: every hook's answer
    (:data:`RETURNS`) and every answer of a runtime's rules (:data:`RULE_RETURNS`).
    """
    if value is None and expect.none:
        return value
    if not _is(value, expect.accepted):
        raise PluginError(
            "plugins", f"plugin '{plugin}' returned {type(value).__name__} from {name}; expected {expect.expected}"
        )
    if expect.items is not None:
        for item in value:
            check(plugin, name, item, expect.items)
    if expect.problem is not None:
        problem = expect.problem(value, name, kwargs or {})
        if problem is not None:
            raise PluginError("plugins", f"plugin '{plugin}' {problem}")
    return value


def _guarded_rules(plugin: str, rules: ImportRules) -> ImportRules:
    """``rules`` with each function wrapped so that a wrong answer names the plugin (:data:`RULE_RETURNS`).

    An exception passes through unchanged: the functions read record values,
    and the import turns a value of another JSON type into its rule's
    diagnostic (02 §1).
    """

    def guard(field: str) -> Callable[..., Any]:
        fn = getattr(rules, field)
        name = f"fpm_runtime_rules.{field}"

        def call(*args: Any) -> Any:
            return check(plugin, name, fn(*args), RULE_RETURNS[field])

        return call

    changes = {field: guard(field) for field in RULE_RETURNS if getattr(rules, field) is not None}
    return attrs.evolve(rules, **changes)  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# the facade
# --------------------------------------------------------------------------


def _wraps(impl: Any) -> bool:
    return bool(impl.wrapper or impl.hookwrapper)


class Hooks:
    """Typed calls of every hook; ``host.hooks`` is the instance of a host."""

    def __init__(self, host: HostView) -> None:
        self._host = host

    # -- machinery ------------------------------------------------------------------

    def implementers(self, name: str) -> list[str]:
        """Ids of the plugins that implement hook ``name`` (wrappers not counted), in registration order."""
        caller = getattr(self._host.pm.hook, name)
        return [impl.plugin_name for impl in caller.get_hookimpls() if not _wraps(impl)]

    def caller(self, name: str, plugin: str) -> Any:
        """pluggy's caller of hook ``name`` bound to ``plugin``: the other plugins that implement it removed.

        Plugins that only wrap the hook stay in, so their wrappers run around
        ``plugin``'s implementation.
        """
        pm = self._host.pm
        others = {impl.plugin for impl in getattr(pm.hook, name).get_hookimpls()
                  if impl.plugin_name != plugin and not _wraps(impl)}  # fmt: skip
        return pm.subset_hook_caller(name, others)

    def call(self, name: str, plugin: str, **kwargs: Any) -> Any:
        """The checked answer of ``plugin`` to hook ``name`` (``None``: it gave none), called through pluggy."""
        caller = self.caller(name, plugin)
        try:
            result = caller(**kwargs)
        except FpmError:
            raise
        except Exception as exc:
            raise PluginError("plugins", f"plugin '{plugin}' failed in {name}: {type(exc).__name__}: {exc}") from exc
        if not caller.spec.opts.get("firstresult"):  # a collecting hook: the list of the answers given
            if len(result) > 1:
                raise PluginError("plugins", f"plugin '{plugin}' gave {len(result)} answers to {name}; expected one")
            result = result[0] if result else None
        if result is None:
            return None
        return check(plugin, name, result, RETURNS[name], kwargs)

    def first(self, name: str, **kwargs: Any) -> tuple[str, Any] | None:
        """``(plugin, answer)`` of the first plugin, in pluggy's call order, that answers hook ``name``."""
        for plugin in reversed(self.implementers(name)):
            value = self.call(name, plugin, **kwargs)
            if value is not None:
                return plugin, value
        return None

    def each(self, name: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """``(plugin, answer)`` of every plugin that answers hook ``name``, in registration order."""
        found = []
        for plugin in self.implementers(name):
            value = self.call(name, plugin, **kwargs)
            if value is not None:
                found.append((plugin, value))
        return found

    # -- selection ------------------------------------------------------------------

    def runtime(self, pin: str) -> RuntimeHooks:
        """The runtime hooks of ``pin`` (``vllm==0.33.0``), bound to the one runtime plugin that targets it.

        Raises :class:`~fpmcore.documents.errors.FpmError` when no plugin, or more than
        one, targets ``pin``.
        """
        return RuntimeHooks(self, self._host.select_runtime(pin).id, pin)

    def measurement_driver(self, pin: str) -> MeasurementDriver:
        """The measurement driver of the runtime plugin selected for ``pin`` (``fpm_measurement_driver``).

        The one place ``fpm collect``, ``fpm onboard``, the assessment and the
        engine-steps contract (A-21) ask for one; the refusal names the pin
        when no plugin drives an engine for it.
        """
        try:
            return self.runtime(pin).measurement_driver()
        except FpmError as exc:
            raise FpmError(
                "plugins", f"no runtime plugin drives a measurement engine for {pin}: {exc.message}"
            ) from None

    def replay_runtimes(self) -> list[str]:
        """The pins of the installed runtime plugins that give replay rules, sorted (a plugin whose answer is wrong gives none)."""
        pins = []
        for record in self._host.active("runtime"):
            for pin in record.targets:
                try:
                    if self.call("fpm_replay_rules", record.id, runtime=pin) is not None:
                        pins.append(pin)
                except PluginError:
                    continue
        return sorted(pins)

    def replay_rules(self, pin: str) -> ReplayRules:
        """The replay rules of runtime ``pin``, from the runtime plugin that targets it (R-1).

        Raises :class:`~fpmcore.documents.errors.FpmError` (R-1) when no installed
        runtime plugin gives replay rules for ``pin``, naming the runtimes
        that have them: the replay never assumes another release's scheduler.
        """
        rules = None
        try:
            rules = self.runtime(pin).replay_rules()
        except FpmError as exc:
            if isinstance(exc, PluginError):
                raise
        if rules is None:
            have = ", ".join(self.replay_runtimes()) or "none"
            raise FpmError("R-1", f"no installed runtime plugin gives replay semantics for {pin}; "
                                  f"runtimes with replay semantics: {have}")  # fmt: skip
        return rules

    def model(self, model: str) -> ModelHooks:
        """The model hooks of ``model``, bound to the one model plugin whose id or targets name it.

        When no plugin (or more than one) claims ``model``, each hook of the
        answer raises :class:`~fpmcore.documents.errors.FpmError` saying what it lacks and why.
        """
        try:
            return ModelHooks(self, self._host.select_model(model).id, model)
        except FpmError as exc:
            return ModelHooks(self, None, model, unselected=exc.message)

    # -- model plugins: contracts and artifacts ------------------------------------------

    def producer_contracts(self) -> list[tuple[str, ProducerContract]]:
        """``(plugin id, contract)`` of every registered producer contract."""
        return [(plugin, c) for plugin, contracts in self.each("fpm_producer_contracts") for c in contracts]

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

        A plugin that implements ``fpm_choose_producer_contract`` claims what
        it answers; one that does not claims its registered contracts
        (``fpm_producer_contracts``) whose key matches the identity: the
        residency and, when the contract names one, the execution profile
        (:meth:`~fpmcore.host.hooktypes.ProducerContract.claims`).
        Nobody claiming the residency is A-14; two plugins claiming it is the
        conflict diagnostic of 05 §6.3.
        """
        if not identity.configuration_bound:
            return None
        residency = identity.engram_residency
        claims = self.each("fpm_choose_producer_contract", identity=identity)
        choosers = set(self.implementers("fpm_choose_producer_contract"))
        # the hook's default: a plugin that does not implement it claims by the key of its registrations
        claims += [(plugin, c) for plugin, c in self.producer_contracts()
                   if plugin not in choosers and c.claims(identity)]  # fmt: skip
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
        attempt: str = ".",
        owners: Mapping[str, str] | None = None,
        producer: Mapping[str, Any] | None = None,
    ) -> list[Diagnostic]:
        """The diagnostics of a cell under ``contract`` (empty: accepted); raises when no plugin owns it.

        ``owners`` defaults to none, ``producer`` to ``{"error": …}`` (no producer record).
        """
        hit = self.first(
            "fpm_validate_artifact", contract=contract, cell=cell, files=files, plan=plan, attempt=attempt,
            owners=dict(owners or {}), producer=dict(producer) if producer is not None else dict(NO_PRODUCER),
        )  # fmt: skip
        if hit is None:
            raise FpmError("plugins", f"no model plugin validates artifacts of contract {contract.name}")
        return list(hit[1])

    # -- command line -------------------------------------------------------------------

    def cli_commands(self) -> list[tuple[str, CliCommand]]:
        """``(plugin id, command)`` of every subcommand, in registration order (built-ins first).

        A plugin whose ``fpm_cli_commands`` fails loses its commands, not the
        command line: the host marks it failed (``fpm plugins`` shows why) and
        the other plugins' commands are returned.
        """
        found: list[tuple[str, CliCommand]] = []
        for plugin in self.implementers("fpm_cli_commands"):
            try:
                commands = self.call("fpm_cli_commands", plugin) or []
            except PluginError as exc:
                cause = exc.__cause__ or exc  # what the plugin raised, or the wrong answer
                self._host.plugin_failed(plugin, f"fpm_cli_commands: {type(cause).__name__}: {cause}", cause)
                continue
            found.extend((plugin, c) for c in commands)
        return found

    # -- trace formats ------------------------------------------------------------------

    def trace_formats(self) -> list[tuple[str, TraceFormat]]:
        """``(plugin id, format)`` of every trace format, in registration order (the host's first).

        A plugin whose ``fpm_trace_formats`` fails loses its formats: the host
        marks it failed and the other plugins' formats are returned.
        """
        found: list[tuple[str, TraceFormat]] = []
        for plugin in self.implementers("fpm_trace_formats"):
            try:
                formats = self.call("fpm_trace_formats", plugin) or []
            except PluginError as exc:
                cause = exc.__cause__ or exc
                self._host.plugin_failed(plugin, f"fpm_trace_formats: {type(cause).__name__}: {cause}", cause)
                continue
            found.extend((plugin, f) for f in formats)
        return found

    # -- the rule catalogue -------------------------------------------------------------

    def rule_catalogue(self) -> list[tuple[str, RuleEntry]]:
        """``(plugin id, entry)`` of every rule id a plugin describes (``fpm_rule_catalogue``), in registration order."""
        return [(plugin, e) for plugin, entries in self.each("fpm_rule_catalogue") for e in entries]


class RuntimeHooks:
    """The runtime hooks of one runtime pin, dispatched only to the runtime plugin selected for it.

    ``plugin`` is that plugin's id and ``pin`` the exact pin
    (``vllm==0.33.0``) every hook gets as its ``runtime`` argument.
    """

    def __init__(self, hooks: Hooks, plugin: str, pin: str) -> None:
        self._hooks = hooks
        self.plugin = plugin
        self.pin = pin

    def __repr__(self) -> str:
        return f"RuntimeHooks(plugin={self.plugin!r}, pin={self.pin!r})"

    @property
    def version(self) -> str:
        """The pin's version (``0.33.0`` of ``vllm==0.33.0``)."""
        return RuntimePin.version_of(self.pin)

    def _call(self, name: str, **kwargs: Any) -> Any:
        return self._hooks.call(name, self.plugin, runtime=self.pin, **kwargs)

    def _missing(self, name: str) -> FpmError:
        return FpmError("plugins", f"runtime plugin '{self.plugin}' does not implement {name} for {self.pin}")

    def observe_cache_groups(self, *, source: Mapping[str, Any], phase: str, rank: int) -> dict[str, Any]:
        """The record of :func:`~fpmcore.hookspecs.fpm_observe_cache_groups`."""
        record = self._call("fpm_observe_cache_groups", source=source, phase=phase, rank=rank)
        if record is None:
            raise self._missing("fpm_observe_cache_groups")
        return record  # type: ignore[no-any-return]

    def dry_probe(
        self, *, model_path: str, out_dir: str, tp: int, caching: bool, configuration: str | None
    ) -> dict[str, Any]:
        """The summary of :func:`~fpmcore.hookspecs.fpm_dry_probe`."""
        summary = self._call(
            "fpm_dry_probe", model_path=model_path, out_dir=out_dir, tp=tp, caching=caching,
            configuration=configuration,
        )  # fmt: skip
        if summary is None:
            raise self._missing("fpm_dry_probe")
        return summary  # type: ignore[no-any-return]

    def live_probe(
        self,
        *,
        model_dir: str,
        out_dir: str,
        options: LiveProbeOptions,
        progress: Callable[[str], AbstractContextManager[None]],
    ) -> dict[str, Any]:
        """The summary of :func:`~fpmcore.hookspecs.fpm_live_probe`; raises when the plugin runs no engine."""
        summary = self._call("fpm_live_probe", model_dir=model_dir, out_dir=out_dir, options=options,
                             progress=progress)  # fmt: skip
        if summary is None:
            raise self._missing("fpm_live_probe")
        return summary  # type: ignore[no-any-return]

    def normalize_record(self, *, record: Mapping[str, Any]) -> dict[str, Any]:
        """The record in the form the import rules read; by default a new top-level dict of its values."""
        normalized = self._call("fpm_normalize_record", record=record)
        return dict(record) if normalized is None else normalized

    def classify_spec(self, *, spec_class: str, spec: Mapping[str, Any]) -> SpecClassification | None:
        """The classification of ``spec_class``, or ``None`` when the plugin gives none."""
        return self._call("fpm_classify_spec", spec_class=spec_class, spec=spec)  # type: ignore[no-any-return]

    def measurement_driver(self) -> MeasurementDriver:
        """The :class:`~fpmcore.host.engine_drivers.MeasurementDriver` of :func:`~fpmcore.hookspecs.fpm_measurement_driver`."""
        driver = self._call("fpm_measurement_driver")
        if driver is None:
            raise self._missing("fpm_measurement_driver")
        return driver  # type: ignore[no-any-return]

    def serving_engine(self) -> ServingDriver | None:
        """The :class:`~fpmcore.host.engine_drivers.ServingDriver` of :func:`~fpmcore.hookspecs.fpm_serving_engine`, or
        ``None`` when the plugin serves no engine (the hook is optional)."""
        return self._call("fpm_serving_engine")  # type: ignore[no-any-return]

    def engine_limits(self, *, request: EngineRequest) -> list[EngineLimit]:
        """The :class:`~fpmcore.host.stage_hooktypes.EngineLimit` s ``request`` meets (:func:`~fpmcore.hookspecs.fpm_engine_limits`);
        none when the plugin names no limit."""
        return list(self._call("fpm_engine_limits", request=request) or [])

    def rules(self) -> ImportRules:
        """The :class:`~fpmcore.host.stage_hooktypes.ImportRules` of the pin; the defaults when the plugin gives none.

        The rules must be for the pin's version and their labels strings.
        Each of their functions is wrapped so that an answer of the wrong
        type names the plugin, like a hook's (:data:`RULE_RETURNS`).
        """
        rules = self._call("fpm_runtime_rules")
        if rules is None:
            from fpmcore.host.stage_hooktypes import ImportRules

            return ImportRules(version=self.version)
        return _guarded_rules(self.plugin, rules)

    def replay_rules(self) -> ReplayRules | None:
        """The replay rules of the pin (:func:`~fpmcore.hookspecs.fpm_replay_rules`), or ``None`` when the plugin gives none."""
        return self._call("fpm_replay_rules")  # type: ignore[no-any-return]


class ModelHooks:
    """The model hooks of one model id, dispatched only to the model plugin selected for it.

    ``plugin`` is that plugin's id, or ``None`` when none was selected
    (``unselected`` says why; every hook then raises).
    """

    def __init__(self, hooks: Hooks, plugin: str | None, model: str, *, unselected: str = "") -> None:
        self._hooks = hooks
        self.plugin = plugin
        self.model = model
        self._unselected = unselected

    def __repr__(self) -> str:
        return f"ModelHooks(plugin={self.plugin!r}, model={self.model!r})"

    def _call(self, name: str, lacking: str, **kwargs: Any) -> Any:
        if self.plugin is None:
            raise FpmError("plugins", f"{lacking}: {self._unselected}")
        answer = self._hooks.call(name, self.plugin, model=self.model, **kwargs)
        if answer is None:
            raise FpmError("plugins", f"{lacking} (model plugin '{self.plugin}' gives none)")
        return answer

    def align_stop(self, *, runtime: str, query: AlignStopQuery) -> int:
        """Tokens ``runtime`` schedules of ``query``'s chunk (04 G-6); raises when the plugin has no rule for it."""
        lacking = f"no model plugin implements the align-stop rule for '{self.model}' on {runtime}"
        return self._call("fpm_align_stop", lacking, runtime=runtime, query=query)  # type: ignore[no-any-return]

    def generate_points(self, *, profile: FpmModelProfile, deployment: int, limits: PlanLimits) -> PointPlan:
        """The point plan of the model; raises when the plugin plans none."""
        lacking = f"no model plugin generates points for '{self.model}'"
        return self._call(  # type: ignore[no-any-return]
            "fpm_generate_points", lacking, profile=profile, deployment=deployment, limits=limits
        )

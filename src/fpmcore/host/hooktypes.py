"""Value types exchanged through the hooks of :mod:`fpmcore.hookspecs`.

Every type here is an ``attrs`` frozen class: a plugin builds one, the host
checks it (:mod:`fpmcore.host.hooks`) and never mutates it.  Plugins import them
from :mod:`fpmcore.plugin_api`::

    from fpmcore.plugin_api import PluginInfo, SpecClassification, hookimpl

This module holds what every start of ``fpm`` needs: a plugin's identity
(:class:`PluginInfo`), its commands (:class:`CliCommand`, :class:`CommandContext`)
and the producer contracts a model plugin declares when it loads.  The values of
the pipeline stages' hooks (:class:`SpecClassification`, :class:`ImportRules`,
:class:`LiveProbeOptions`, :class:`AlignStopQuery`, :class:`PointPlan`, …) live in
:mod:`fpmcore.host.stage_hooktypes`, imported when a stage first calls such a hook;
this module gives them by name too (``hooktypes.ImportRules``).  The values of the
engine-driver hooks (``fpm_measurement_driver``, ``fpm_serving_engine``) are in
:mod:`fpmcore.host.engine_drivers`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

import attrs

from fpmcore.documents.diagnostics import Diagnostic as Diagnostic  # re-exported: plugins import it from here
from fpmcore.documents.field_helpers import as_tuple, nonblank
from fpmcore.replay.rules import ReplayRules as ReplayRules  # re-exported: the value of fpm_replay_rules

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from fpmcore.cli.tables import Table as TextTable
    from fpmcore.documents.rules_catalogue import RuleEntry as RuleEntry  # the value of fpm_rule_catalogue
    from fpmcore.host.plugins import PluginHost
    from fpmcore.host.stage_hooktypes import (
        HARDWARE_KEYS as HARDWARE_KEYS,
    )
    from fpmcore.host.stage_hooktypes import (
        MODEL_DTYPE_LABELS as MODEL_DTYPE_LABELS,
    )
    from fpmcore.host.stage_hooktypes import (
        AlignStopQuery as AlignStopQuery,
    )
    from fpmcore.host.stage_hooktypes import (
        CacheKind as CacheKind,
    )
    from fpmcore.host.stage_hooktypes import (
        EngineLimit as EngineLimit,
    )
    from fpmcore.host.stage_hooktypes import (
        EngineRequest as EngineRequest,
    )
    from fpmcore.host.stage_hooktypes import (
        HashBlockQuery as HashBlockQuery,
    )
    from fpmcore.host.stage_hooktypes import (
        ImportRules as ImportRules,
    )
    from fpmcore.host.stage_hooktypes import (
        LiveProbeOptions as LiveProbeOptions,
    )
    from fpmcore.host.stage_hooktypes import (
        PlanLimits as PlanLimits,
    )
    from fpmcore.host.stage_hooktypes import (
        PointPlan as PointPlan,
    )
    from fpmcore.host.stage_hooktypes import (
        SpecClassification as SpecClassification,
    )
    from fpmcore.host.stage_hooktypes import (
        StartupLimits as StartupLimits,
    )
    from fpmcore.host.stage_hooktypes import (
        StateFamily as StateFamily,
    )

#: The names of :mod:`fpmcore.host.stage_hooktypes` this module gives.
STAGE_TYPES = frozenset({
    "HARDWARE_KEYS", "MODEL_DTYPE_LABELS", "AlignStopQuery", "CacheKind", "EngineLimit", "EngineRequest",
    "HashBlockQuery", "ImportRules", "LiveProbeOptions", "PlanLimits", "PointPlan", "SpecClassification",
    "StartupLimits", "StateFamily",
})  # fmt: skip


#: Where each name this module gives without importing it lives: the stage types, and the value of
#: ``fpm_rule_catalogue`` (the catalogue's module).  Each is imported when first read.
_LAZY = {**dict.fromkeys(STAGE_TYPES, "fpmcore.host.stage_hooktypes"), "RuleEntry": "fpmcore.documents.rules_catalogue"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from fpmcore.host.entry_points import import_object

        value = import_object(f"{_LAZY[name]}:{name}")
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Version of the hook API.  A plugin whose :class:`PluginInfo` names another
#: ``api_version`` is listed as ``incompatible`` and never called.
#:
#: 2: runtime hooks reach only the runtime plugin selected for the pin, model
#: hooks only the model plugin selected for the model; ``fpm_align_stop``
#: takes the runtime pin; :attr:`SpecClassification.composite` replaces
#: ``uniform``; :class:`ImportRules` gains ``nullable_settings``,
#: ``in_flight_batches`` and ``hash_block_size``; ``fpm_normalize_record`` is
#: optional.
#:
#: Additions a plugin of this version need not know keep the version: the
#: optional hooks ``fpm_live_probe`` and its :class:`LiveProbeOptions`, and
#: ``fpm_serving_engine`` and its :class:`ServingDriver`; the optional hook
#: ``fpm_engine_limits`` with :class:`EngineRequest` and :class:`EngineLimit`;
#: :attr:`EngineFacts.cache_block_sizes` (default empty);
#: :class:`ImportRules`' ``kv_cache_sizing``, ``storage_devices``,
#: ``absent_hardware``, ``graph_capture`` and ``model_dtype_labels``, whose
#: defaults are the rules of 02 as written.
API_VERSION = 2

PluginKind = Literal["runtime", "model", "builtin"]


@attrs.frozen
class PluginInfo:
    """What a plugin is and what it serves.

    ``id``
        Short stable identifier (``vllm_033``, ``glm53flash``): the name of the
        entry point, the key of ``FPM_PLUGINS``/``--plugin``.
    ``kind``
        ``"runtime"`` (one exact runtime version), ``"model"`` (one model
        family) or ``"builtin"`` (ships inside fpmcore itself).
    ``targets``
        Runtime plugins: exact pins such as ``"vllm==0.33.0"``; model plugins:
        model ids (``"glm53flash"``, ``"zai-org/GLM-5.3-Flash"``).
    ``api_version``
        The :data:`API_VERSION` the plugin was written against.
    ``summary``
        One line for ``fpm plugins show``.
    """

    id: str = attrs.field(validator=nonblank)
    kind: PluginKind = attrs.field(validator=attrs.validators.in_(("runtime", "model", "builtin")))
    targets: tuple[str, ...] = attrs.field(converter=as_tuple)
    api_version: int = attrs.field(validator=attrs.validators.instance_of(int))
    summary: str = ""


@attrs.frozen
class ExecutionIdentity:
    """The execution identity of a collection cell (05 §6.2)."""

    model_config_sha256: str
    execution_profile: str
    engram_residency: str
    input_modality: str

    @property
    def configuration_bound(self) -> bool:
        """A cell with an empty ``model_config_sha256`` has no configuration-bound identity."""
        return self.model_config_sha256 != ""


@attrs.frozen
class ProducerContract:
    """A producer contract a model plugin claims (05 §6.3).

    ``name`` such as ``glm53flash_native_graph_policy``; ``execution_mode``
    the artifact label the contract requires; ``residency`` the Engram
    residency it is registered for; ``label`` how diagnostics name the
    contract's model (``glm-5.3-flash``); ``protocol_producer`` the
    ``measurement_protocol.producer.name`` only this contract may carry
    (A-17), or ``None``; ``execution_profile`` the cells' execution profile
    the contract is registered for, or ``None`` for every profile.

    A contract's key is its residency and its execution profile: two
    contracts of one residency coexist when both name different profiles
    (05 §10 asks for such a key: a model with a configuration-bound identity
    and residency ``none`` besides GLM-5.3-Flash's).
    """

    name: str = attrs.field(validator=nonblank)
    execution_mode: str = attrs.field(validator=nonblank)
    residency: str = attrs.field(validator=nonblank)
    label: str = ""
    protocol_producer: str | None = None
    execution_profile: str | None = None

    def claims(self, identity: ExecutionIdentity) -> bool:
        """The contract's key matches ``identity``: its residency, and its profile when it names one."""
        return identity.engram_residency == self.residency and (
            self.execution_profile is None or identity.execution_profile == self.execution_profile
        )

    def overlaps(self, other: ProducerContract) -> bool:
        """Some identity would be claimed by both (their keys clash, 05 §6.3)."""
        return self.residency == other.residency and (
            self.execution_profile is None
            or other.execution_profile is None
            or self.execution_profile == other.execution_profile
        )


@attrs.frozen
class CliCommand:
    """A subcommand a plugin adds to ``fpm``.

    ``configure(parser)`` adds its arguments; ``run(args, ctx)`` does the work
    and returns the exit code (0 ok, 1 negative verdict, 2 bad usage/input).
    ``ctx`` is a :class:`CommandContext` (fpm's :class:`fpmcore.cli.context.Context`).
    """

    name: str = attrs.field(validator=nonblank)
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, CommandContext], int]


class CommandContext(Protocol):
    """What a command's ``run(args, ctx)`` may use of ``ctx``, the one ``fpm`` run it serves.

    ``host`` the plugin host; ``json`` ``--json`` was given; ``out``/``err`` rich
    consoles on stdout/stderr; ``message`` one plain line on stderr;
    ``print_table`` a table on stdout at any width (a :class:`~fpmcore.cli.tables.Table`,
    ``TextTable`` in the plugin API, or a rich one); ``emit_json`` the one
    JSON document of ``--json``; ``progress`` the progress bar on stderr (rich's
    ``Progress``, or one that does nothing when stderr is no terminal).
    """

    @property
    def host(self) -> PluginHost: ...
    @property
    def json(self) -> bool: ...
    @property
    def out(self) -> Console: ...
    @property
    def err(self) -> Console: ...
    def message(self, text: str) -> None: ...
    def print_table(self, table: TextTable | Table) -> None: ...
    def emit_json(self, document: dict[str, Any]) -> None: ...
    def progress(self, unit: str | None = None, *, steps: bool = False, transient: bool = True) -> ProgressBar: ...


class ProgressBar(Protocol):
    """What a command does with :meth:`CommandContext.progress`: the calls it makes on rich's ``Progress``."""

    def __enter__(self) -> ProgressBar: ...
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any, /) -> None: ...
    def add_task(
        self, description: str, /, *, total: float | None = ..., completed: int = ..., steps: int = ...
    ) -> Any: ...
    def update(
        self,
        task: Any,
        /,
        *,
        completed: float = ...,
        total: float | None = ...,
        description: str = ...,
        steps: int = ...,
    ) -> None: ...
    def advance(self, task: Any, advance: float = 1, /) -> None: ...

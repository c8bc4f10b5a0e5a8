"""Value types exchanged through the hooks of :mod:`fpmcore.hookspecs`.

Every type here is an ``attrs`` frozen class: a plugin builds one, the host
checks it (:mod:`fpmcore.host.hooks`) and never mutates it.  Plugins import them
from :mod:`fpmcore` directly::

    from fpmcore import PluginInfo, SpecClassification, hookimpl

The values of the engine-driver hooks (``fpm_measurement_driver``,
``fpm_serving_engine``) are in :mod:`fpmcore.host.engine_drivers`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

import attrs

from fpmcore.documents.diagnostics import Diagnostic as Diagnostic  # re-exported: plugins import it from here
from fpmcore.documents.field_helpers import as_frozenset, as_tuple, nonblank
from fpmcore.documents.rules_catalogue import RuleEntry as RuleEntry  # re-exported: the value of fpm_rule_catalogue
from fpmcore.replay.rules import ReplayRules as ReplayRules  # re-exported: the value of fpm_replay_rules

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from fpmcore.cli.tables import Table as TextTable
    from fpmcore.host.plugins import PluginHost

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
CacheKind = Literal["attention", "state", "unsupported"]
StateFamily = Literal["mamba", "ring"]


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
class SpecClassification:
    """The answer of ``fpm_classify_spec`` for one cache spec class of a runtime.

    ``kind`` is ``"attention"`` or ``"state"`` (02 §5), or ``"unsupported"``
    with ``reason`` saying why.  ``windowed`` is true for a class whose
    layers keep a sliding window of tokens; ``chunked`` for a class whose
    layers attend only to the current chunk of ``attention_chunk_size``
    tokens (chunked-local attention).  ``composite`` is true for a class
    that holds one spec per layer instead of describing the layers itself: a
    group of it takes the one kind of its per-layer specs (I-42), so the
    caller classifies those instead (vLLM's ``UniformTypeKVCacheSpecs`` is one).
    """

    kind: CacheKind = attrs.field(validator=attrs.validators.in_(("attention", "state", "unsupported")))
    windowed: bool = False
    composite: bool = False
    reason: str | None = None
    chunked: bool = False

    def __attrs_post_init__(self) -> None:
        if (self.kind == "unsupported") != (self.reason is not None):
            raise ValueError("reason is required exactly when kind is 'unsupported'")


@attrs.frozen
class StartupLimits:
    """The settings the startup reservation of one spec (03 C-1) reads, resolved from a record.

    ``max_model_len``     ``L``;
    ``in_flight_tokens``  ``T`` (03 C-2);
    ``dcp``               the decode-context-parallel size;
    ``mamba_cache_mode``  the cache config's Mamba mode (``"none"``, ``"align"``,
                          ``"all"``) or ``None``.

    The values are the record's, unchecked: a formula that meets one of
    another JSON type gives ``None``.
    """

    max_model_len: int
    in_flight_tokens: int
    dcp: int = 1
    mamba_cache_mode: str | None = None


def _no_state_family(spec_class: str) -> StateFamily | None:
    return None


def _always_cacheable(spec_class: str, fields: Mapping[str, Any]) -> bool:
    return True


def _no_startup_blocks(
    spec_class: str, fields: Mapping[str, Any], block_size: Any, limits: StartupLimits
) -> tuple[int, str] | None:
    return None


def _one_batch_per_stage(pp: int, async_scheduling: bool, model_runner: Any) -> int:
    return pp


@attrs.frozen
class HashBlockQuery:
    """What the hash block size rule (02 I-97) reads of a scheduler record and its groups.

    ``block_sizes``            the cache groups' block sizes, in group order;
    ``prefix_cacheable``       each group's ``prefix_cacheable``, in group order;
    ``layer_specs``            ``(spec class, fields)`` of every layer spec of the
                               groups (the worker's view), in group and layer order;
    ``scheduler_block_size``   the scheduler block size (I-96: the setting for one
                               group, else the lcm of the group blocks);
    ``enable_prefix_caching``  the recorded prefix-caching switch;
    ``prefix_match_unit``      the recorded ``cache.prefix_match_unit`` (``None``: unset);
    ``recorded``               the hash block size the scheduler recorded, for the
                               text of a refusal (the resolution never reads it).

    The values are the record's, checked by the earlier stages.
    """

    block_sizes: tuple[int, ...]
    prefix_cacheable: tuple[bool, ...]
    layer_specs: tuple[tuple[Any, Mapping[str, Any]], ...]
    scheduler_block_size: int
    enable_prefix_caching: bool
    prefix_match_unit: Any
    recorded: Any = None


def _scheduler_block(query: HashBlockQuery) -> int | str:
    return query.scheduler_block_size


#: 02 §7.4 (I-32): the label of KV cache dtype ``auto`` by model dtype, the default of
#: :attr:`ImportRules.model_dtype_labels`.
MODEL_DTYPE_LABELS: Mapping[str, str] = {"torch.bfloat16": "bfloat16", "torch.float16": "half"}
#: The keys of a worker's ``hardware`` (02 §3.1).
HARDWARE_KEYS = ("gpu", "sm", "device_name", "total_memory_bytes")


@attrs.frozen
class ImportRules:
    """The answer of ``fpm_runtime_rules``: what the import knows of one runtime version besides its class table.

    Plain data and small pure functions of the plugin; the functions take the
    spec class fully qualified, as recorded (``vllm.v1.kv_cache_interface.MambaSpec``),
    and its recorded ``fields`` (02 §3.7).  Every field but ``version`` has a
    default: a runtime plugin that gives no rules is read as ``ImportRules(version=…)``.

    ``version``
        The exact version the rules are for (``"0.33.0"``).
    ``hybrid_evidence``
        The plugin imports records with hybrid evidence (02 §4).  I-22 accepts a
        hybrid record only of such a version and names them all in its message.
    ``kv_dtype_labels``
        I-32: ``cache.kv_cache_dtype`` → profile KV label for every value but
        ``auto`` (which takes the model dtype's label, 02 §7.4).  A dtype not
        listed has no label.
    ``classify_plain(spec_class)``
        The class table of a record *without* hybrid evidence (02 §5.1, applied
        whatever the version), a :class:`SpecClassification`.  ``None``: the
        plugin's ``fpm_classify_spec`` answers those records too.
    ``state_family(spec_class)``
        ``"mamba"`` for a Mamba state spec (checkpoint evidence I-54 … I-59,
        steady count I-60, align mode I-97), ``"ring"`` for a ring-buffer
        state spec, ``None`` for any other class.
    ``prefix_cacheable(spec_class, fields)``
        The class rule of a spec's ``prefix_cacheable`` (I-44, I-99).
    ``startup_blocks(spec_class, fields, block_size, limits)``
        03 C-1: the startup reservation of one spec as ``(blocks, formula)``,
        the formula being the text I-61 prints, or ``None`` when the record
        does not give what the formula needs.  ``limits`` is a
        :class:`StartupLimits`.
    ``nullable_settings``
        I-28: the settings (``"<section>.<key>"``, or ``"<key>"`` for a
        top-level one) that the runtime leaves ``null`` although 02 §3.4
        types them; a record of this runtime may hold ``null`` there.
        Default: none.
    ``in_flight_batches(pp, async_scheduling, model_runner)``
        03 C-2: the runtime's ``max_concurrent_batches`` for the record's
        pipeline size, scheduling mode and ``settings.model_runner``; the
        in-flight tokens ``T`` are that times ``max_num_batched_tokens``.
        Default: ``pp`` (one batch in flight per pipeline stage).
    ``hash_block_size(query)``
        I-97: the prefix-hash block size the runtime resolves for the
        scheduler's groups (a :class:`HashBlockQuery`), or, as a string, why
        the runtime would not start with them (I-97 prints it after
        ``scheduler block sizes contradict its cache groups:``).  Default:
        the scheduler block size.

    **Where the runtime's platform differs from 02.**  02 describes a GPU
    deployment.  A runtime whose engine runs elsewhere (vLLM's CPU engine)
    states what of 02 cannot hold there; the import accepts exactly that and
    adds a note that names the rule and this field (``fpm import`` prints the
    notes, the result and the provenance list them).  The defaults are 02 as
    written.

    ``kv_cache_sizing``
        I-31: the cache settings (``"cache.kv_cache_memory_bytes"``,
        ``"cache.num_gpu_blocks_override"``) through which the platform sizes
        the KV cache itself, so that a record holds a value there without
        offloading or overriding a profiled allowance.  Default: none.
    ``storage_devices``
        I-64: the prefixes of the devices the KV cache storages live on
        (a storage's ``device`` is one of them or starts with one).
        Default ``("cuda:",)``.
    ``absent_hardware``
        I-35: the ``hardware`` keys (:data:`HARDWARE_KEYS`) the platform does
        not have (``"sm"`` on a CPU): ``null`` there.  Default: none.
    ``graph_capture``
        I-20: the runtime captures graphs at start-up.  ``False``: it captures
        none (a CPU engine), so a worker's ``capture_completed`` is ``false``.
        Default ``True``.
    ``model_dtype_labels``
        I-32, I-33: the label of KV cache dtype ``auto`` for each model dtype
        (``"torch.float32"`` → ``"float32"`` on an engine that runs float32
        natively).  Default :data:`MODEL_DTYPE_LABELS`.
    """

    version: str = attrs.field(validator=nonblank)
    hybrid_evidence: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    kv_dtype_labels: Mapping[str, str] = attrs.field(factory=dict, validator=attrs.validators.instance_of(Mapping))  # type: ignore[type-abstract]
    classify_plain: Callable[[str], SpecClassification] | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.is_callable())
    )
    state_family: Callable[[str], StateFamily | None] = attrs.field(
        default=_no_state_family, validator=attrs.validators.is_callable()
    )
    prefix_cacheable: Callable[[str, Mapping[str, Any]], bool] = attrs.field(
        default=_always_cacheable, validator=attrs.validators.is_callable()
    )
    startup_blocks: Callable[[str, Mapping[str, Any], Any, StartupLimits], tuple[int, str] | None] = attrs.field(
        default=_no_startup_blocks, validator=attrs.validators.is_callable()
    )
    nullable_settings: frozenset[str] = attrs.field(default=frozenset(), converter=as_frozenset)
    in_flight_batches: Callable[[int, bool, Any], int] = attrs.field(
        default=_one_batch_per_stage, validator=attrs.validators.is_callable()
    )
    hash_block_size: Callable[[HashBlockQuery], int | str] = attrs.field(
        default=_scheduler_block, validator=attrs.validators.is_callable()
    )
    kv_cache_sizing: frozenset[str] = attrs.field(default=frozenset(), converter=as_frozenset)
    storage_devices: tuple[str, ...] = attrs.field(default=("cuda:",), converter=as_tuple)
    absent_hardware: frozenset[str] = attrs.field(default=frozenset(), converter=as_frozenset)
    graph_capture: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
    model_dtype_labels: Mapping[str, str] = attrs.field(
        default=MODEL_DTYPE_LABELS,
        validator=attrs.validators.instance_of(Mapping),  # type: ignore[type-abstract]
    )


def _positive_or_none(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
        raise ValueError(f"{attribute.name} must be a positive integer or None; got {value!r}")


@attrs.frozen
class LiveProbeOptions:
    """How ``fpm probe --live`` starts the engine it observes (``fpm_live_probe``).

    ``None`` leaves a setting to the runtime (its default for the model).

    ``caching``                  prefix caching on or off;
    ``max_model_len``            the context length;
    ``dtype``                    the model dtype the runtime loads (``"float32"``, ``"bfloat16"``);
    ``kv_cache_bytes``           the memory the KV cache gets, in bytes;
    ``num_blocks``               a forced pool size in blocks (memory pressure for a replay check);
    ``max_num_seqs``             the scheduler's running-request limit;
    ``max_num_batched_tokens``   the scheduler's token budget per step;
    ``enforce_eager``            run without graph compilation (a start in seconds, not minutes);
    ``configuration``            the configuration label of the evidence (02 §2.1).
    """

    caching: bool = True
    max_model_len: int | None = attrs.field(default=None, validator=_positive_or_none)
    dtype: str | None = None
    kv_cache_bytes: int | None = attrs.field(default=None, validator=_positive_or_none)
    num_blocks: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_num_seqs: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_num_batched_tokens: int | None = attrs.field(default=None, validator=_positive_or_none)
    enforce_eager: bool = True
    configuration: str | None = None


@attrs.frozen
class EngineRequest:
    """What the host is about to start a runtime's engine with (``fpm_engine_limits``), before it starts.

    ``model_config``    the model folder's ``config.json`` object, as read;
    ``prefix_caching``  prefix caching on or off;
    ``dtype``           the model dtype asked for (``"float32"``, ``"bfloat16"``; ``None``: the runtime's
                        choice for the model);
    ``max_model_len``   the context length (``None``: the model's).
    """

    model_config: Mapping[str, Any] = attrs.field(validator=attrs.validators.instance_of(Mapping))  # type: ignore[type-abstract]
    prefix_caching: bool
    dtype: str | None = None
    max_model_len: int | None = None


@attrs.frozen
class EngineLimit:
    """A configuration a runtime's engine cannot run here, named before the engine starts (``fpm_engine_limits``).

    ``rule``     a short stable id of the limit (``mamba2-prefix-caching``): the diagnostic's rule;
    ``message``  one line: what fails, where in the runtime (file:line) and when;
    ``fix``      the way out as the options of ``fpm probe --live`` and ``fpm onboard``
                 (``--caching off``), or ``""`` when no option runs the model here.
    """

    rule: str = attrs.field(validator=nonblank)
    message: str = attrs.field(validator=nonblank)
    fix: str = ""


@attrs.frozen
class AlignStopQuery:
    """One evaluation of the Mamba align-stop rule (04 G-2).

    ``start``            tokens already computed plus new prefix-cache hits;
    ``num_new_tokens``   the proposed chunk ``k`` (> 0), already clipped to the
                         token budget left in the step;
    ``prompt_len``       prompt length;
    ``num_tokens``       prompt plus tokens generated so far;
    ``block_size``       the Mamba / attention block ``B``;
    ``hash_block_size``  the prefix-hash block ``H``;
    ``max_num_batched_tokens``  the *configured* token budget (G-5);
    ``checkpoint_alignment``  ``A`` when every Mamba group has a prefill
                         checkpoint block, else ``None`` (G-2 ``ckpt_all``);
    ``junction``         shared-prefix boundary, 0 when none (R-36);
    ``junction_checkpoint``  the opt-in shared-prefix checkpoint (G-6 stop 4).
    """

    start: int
    num_new_tokens: int
    prompt_len: int
    num_tokens: int
    block_size: int
    hash_block_size: int
    max_num_batched_tokens: int
    checkpoint_alignment: int | None
    junction: int = 0
    junction_checkpoint: bool = False


@attrs.frozen
class PlanLimits:
    """The limits a point list is planned for (04 G-9).

    Defaults come from the profile; the CLI flags override them.
    """

    token_budget: int
    max_model_len: int
    block_size: int
    hash_block_size: int


def _mappings(items: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    return tuple(items)


@attrs.frozen
class PointPlan:
    """The result of ``fpm_generate_points`` (04 G-16 … G-25).

    ``points``   the canonical point list (JSON-ready mappings, G-21/G-22);
    ``counts``   points per phase (``{"prefill": 496, "decode": 81}``);
    ``dropped``  candidates dropped per rule, in rule order;
    ``digest``   lowercase hex SHA-256 of the canonical list (G-23);
    ``smoke``    the smoke subset (G-24);
    ``report``   anything else worth printing (capacity needed, …).
    """

    points: tuple[Mapping[str, Any], ...] = attrs.field(converter=_mappings)
    counts: Mapping[str, int]
    dropped: Mapping[str, int]
    digest: str
    smoke: tuple[Mapping[str, Any], ...] = attrs.field(converter=_mappings)
    report: Mapping[str, Any] = attrs.field(factory=dict)


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

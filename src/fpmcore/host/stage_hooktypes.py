"""Value types of the pipeline stages' hooks: import, probe, plan and replay.

The values of the hooks a stage calls when it runs (``fpm_classify_spec``,
``fpm_runtime_rules``, ``fpm_live_probe``, ``fpm_engine_limits``,
``fpm_generate_points``, ``fpm_align_stop``, …), split from
:mod:`fpmcore.host.hooktypes` so that a command imports them when it first
calls such a hook, not at every start of ``fpm``: ``fpm --help`` and
``fpm plugins`` need only the plugins' identity and commands.  Like every hook
value, each is an ``attrs`` frozen class a plugin builds and the host checks;
plugins import them from :mod:`fpmcore.plugin_api`, and
:mod:`fpmcore.host.hooktypes` gives them by name too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import attrs

from fpmcore.documents.field_helpers import as_frozenset, as_tuple, nonblank

CacheKind = Literal["attention", "state", "unsupported"]
StateFamily = Literal["mamba", "ring"]


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

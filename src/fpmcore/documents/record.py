"""The runtime observation record ``fpmcore-runtime-observation/v1`` (02 §3): its classes, key sets and JSON Schema.

The record is defined once, here, as ``attrs`` classes: :class:`WorkerRecord`
and :class:`SchedulerRecord` and the objects they hold, each field in the
order the record writes it.  The runtime plugins' observers build them and
write them with :func:`record_to_json`; :func:`record_from_json` reads one
back.  Both go through the project's one cattrs converter
(:data:`fpmcore.documents.schema.converter`, strict scalars, unknown keys refused).

A key that 02 §3.13 makes *optional* is a field whose value may be
:data:`ABSENT`: such a key is left out of the written record, while ``None``
is written as ``null``.  Values the spec leaves open (``launch``,
``settings``, ``prefix_caching``, a spec's ``fields``) are plain mappings.

:data:`KEY_SETS` (the table of 02 §3.13: the closed key set of every record
object) is derived from the classes; the import's I-13 and
:func:`record_json_schema` read it.  The import judges values with its own
rules, so that a malformed record gets its rule's diagnostic; this module
states the shape.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping
from typing import Any, Union

import attrs
from cattrs.gen import make_dict_structure_fn, override

from fpmcore.documents.schema import converter

SCHEMA_VERSION = "fpmcore-runtime-observation/v1"


class Absent(enum.Enum):
    """The type of :data:`ABSENT`."""

    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


#: The value of an optional key that the record leaves out (``None`` is written ``null``).
ABSENT = Absent.ABSENT


@attrs.frozen
class Rank:
    """``binding.rank``: a worker's ``{dp, tp, pp}``; a scheduler's ``tp`` and ``pp`` are ``null``."""

    dp: int
    tp: int | None
    pp: int | None


@attrs.frozen
class Binding:
    """``binding`` (02 §3.1): the configuration, phase and attempt of the launch manifest, and the rank."""

    configuration: str
    phase: str
    attempt_id: str
    kind: str
    rank: Rank


@attrs.frozen
class RuntimeIdentity:
    """``runtime`` (02 §3.3): the runtime's own version, revision, image and the hashes of the files read."""

    framework: str
    version: str
    source_revision: str | None
    source_files: dict[str, str | None]
    image: str | None


@attrs.frozen
class ObserverIdentity:
    """``observer`` (02 §3.3): the distribution and version of the observer, and the SHA-256 of its code."""

    plugin: str
    version: str | None
    source_sha256: str | None


@attrs.frozen
class ModelIdentity:
    """``model`` (02 §3.3): what the runtime loaded."""

    path: str | None
    revision: str | None
    config_sha256: str | None
    loaded_config_commit: str | None


@attrs.frozen
class WorkerLifecycle:
    """``lifecycle`` of a worker (02 §3.6): the moment of observation."""

    measurement: str
    cache_initialized: bool
    warmup_completed: bool
    capture_completed: bool


@attrs.frozen
class SchedulerLifecycle:
    """``lifecycle`` of a scheduler (02 §3.11)."""

    measurement: str
    cache_initialized: bool


@attrs.frozen
class Hardware:
    """``hardware`` of a worker (02 §3.1)."""

    gpu: str | None
    sm: int | None
    device_name: str | None
    total_memory_bytes: int | None


@attrs.frozen
class Storage:
    """``cache.storages[i]`` (02 §3.8): one distinct backing allocation."""

    storage_id: str
    device: str
    pointer: int
    size_bytes: int


@attrs.frozen
class Allocation:
    """``cache.allocations[i]`` (02 §3.8): one planned cache tensor and the layers it serves."""

    storage_id: str | None
    size: int
    layers: list[str]
    layer_stride: int | None
    block_stride: int
    offset: int


@attrs.frozen
class GroupState:
    """``cache.groups[i].state`` (02 §3.7.1): the steady count and checkpoint fields of a state group."""

    blocks_per_request: int
    num_speculative_blocks: int | Absent = attrs.field(default=ABSENT, kw_only=True)
    num_prefill_checkpoint_blocks: int | Absent = attrs.field(default=ABSENT, kw_only=True)
    prefill_checkpoint_alignment: int | None | Absent = attrs.field(default=ABSENT, kw_only=True)
    mamba_cache_mode: str | None | Absent = attrs.field(default=ABSENT, kw_only=True)


@attrs.frozen
class LayerSpec:
    """``cache.groups[i].layer_specs.<layer>`` (02 §3.7): one layer's spec, its fields encoded."""

    spec_class: str = attrs.field(metadata={"key": "class"})  # written ``class``, a Python keyword
    block_size: int
    page_size_bytes: int
    fields: dict[str, Any]


@attrs.frozen
class WorkerGroup:
    """``cache.groups[i]`` of a worker (02 §3.7)."""

    group_id: int
    spec_class: str
    kind: str
    layer_names: list[str]
    block_size_tokens: int
    page_size_bytes: int
    sliding_window: int | None
    prefix_cacheable: bool
    host_resident: bool
    role: str
    startup_blocks_per_request: int | None
    state: GroupState | Absent = attrs.field(default=ABSENT, kw_only=True)
    layer_specs: dict[str, LayerSpec] | Absent = attrs.field(default=ABSENT, kw_only=True)


@attrs.frozen
class LayerView:
    """``cache.layer_views.<layer>[j]`` (02 §3.9): one tensor view bound to a layer."""

    storage_id: str
    storage_offset_bytes: int
    dtype: str
    shape: list[int]
    stride_bytes: list[int]
    element_size_bytes: int
    block_axis: int
    kernel_block_size_tokens: int
    kernel_block_stride: int | Absent = attrs.field(default=ABSENT, kw_only=True)


@attrs.frozen
class AttentionGroup:
    """``cache.attention_groups[j]`` (02 §3.10)."""

    kv_cache_group_id: int
    backend: str
    layer_names: list[str]
    kernel_block_size: int | None
    kernel_block_stride: int


@attrs.frozen
class ModelRunner:
    """``cache.model_runner`` (02 §3.10)."""

    runner_class: str = attrs.field(metadata={"key": "class"})
    version: str
    kernel_block_sizes: list[int] | None


@attrs.frozen
class WorkerCache:
    """``cache`` of a worker (02 §3.6)."""

    num_blocks: int
    available_cache_bytes: int | None
    allocated_cache_bytes: int | None
    kv_cache_layout: str | None
    storages: list[Storage]
    allocations: list[Allocation]
    groups: list[WorkerGroup]
    layer_views: dict[str, list[LayerView]]
    attention_groups: list[AttentionGroup] | None
    model_runner: ModelRunner | None
    placement: str


@attrs.frozen
class SchedulerGroup:
    """``cache.groups[i]`` of a scheduler (02 §3.11): the engine core's copy of the group."""

    group_id: int
    layer_names: list[str]
    spec_class: str
    block_size_tokens: int
    page_size_bytes: int
    sliding_window: int | None
    prefix_cacheable: bool
    host_resident: bool
    role: str
    startup_blocks_per_request: int | None
    spec_fields: dict[str, Any] | Absent = attrs.field(default=ABSENT, kw_only=True)


@attrs.frozen
class Startup:
    """``cache.startup`` of a scheduler (02 §3.11): the startup capacity as resolved."""

    max_model_len: int
    max_in_flight_tokens: int
    kv_cache_max_concurrency: float | None | Absent = attrs.field(default=ABSENT, kw_only=True)
    kv_cache_size_tokens: int | None = attrs.field(kw_only=True)


@attrs.frozen
class SchedulerCache:
    """``cache`` of a scheduler (02 §3.11): the block pool right after initialization."""

    num_blocks: int
    free_blocks: int
    null_block_id: int
    reserved_block_ids: list[int]
    watermark_blocks: int
    pool_count: int
    block_size: int
    hash_block_size: int | None
    cache_hit_alignment_tokens: int | None
    mamba_cache_mode: str | None
    groups: list[SchedulerGroup]
    startup: Startup | None


@attrs.frozen
class RecordHead:
    """What every record holds before its lifecycle (02 §3.1 … §3.5): binding, identities, launch, settings."""

    schema_version: str
    binding: Binding
    runtime: RuntimeIdentity
    observer: ObserverIdentity
    launch: dict[str, Any]
    model: ModelIdentity
    settings: dict[str, Any]
    prefix_caching: dict[str, Any] | Absent = attrs.field(default=ABSENT, kw_only=True)


@attrs.frozen
class WorkerRecord(RecordHead):
    """One worker record (02 §3.1 … §3.10): the head, then the worker's lifecycle, hardware and cache."""

    lifecycle: WorkerLifecycle = attrs.field(kw_only=True)
    hardware: Hardware = attrs.field(kw_only=True)
    cache: WorkerCache = attrs.field(kw_only=True)
    unresolved_fields: list[str] = attrs.field(kw_only=True)
    error: str | None = attrs.field(kw_only=True)


@attrs.frozen
class SchedulerRecord(RecordHead):
    """One scheduler record (02 §3.11): the head, then the scheduler's lifecycle and cache."""

    lifecycle: SchedulerLifecycle = attrs.field(kw_only=True)
    cache: SchedulerCache = attrs.field(kw_only=True)
    unresolved_fields: list[str] = attrs.field(kw_only=True)
    error: str | None = attrs.field(kw_only=True)


@attrs.frozen
class KeySet:
    """Required and optional keys of one record object (02 §3.13)."""

    required: tuple[str, ...]
    optional: tuple[str, ...] = ()

    @property
    def allowed(self) -> frozenset[str]:
        return frozenset(self.required) | frozenset(self.optional)


#: Every record object by the name 02 §3.13 gives its row (``<layer>`` stands for any layer name).
RECORD_OBJECTS: dict[str, type] = {
    "worker record": WorkerRecord,
    "scheduler record": SchedulerRecord,
    "binding": Binding,
    "binding.rank": Rank,
    "runtime": RuntimeIdentity,
    "observer": ObserverIdentity,
    "model": ModelIdentity,
    "lifecycle (worker)": WorkerLifecycle,
    "lifecycle (scheduler)": SchedulerLifecycle,
    "hardware": Hardware,
    "cache (worker)": WorkerCache,
    "cache.storages[i]": Storage,
    "cache.allocations[i]": Allocation,
    "cache.groups[i] (worker)": WorkerGroup,
    "cache.groups[i].state": GroupState,
    "cache.groups[i].layer_specs.<layer>": LayerSpec,
    "cache.layer_views.<layer>[j]": LayerView,
    "cache.attention_groups[j]": AttentionGroup,
    "cache.model_runner": ModelRunner,
    "cache (scheduler)": SchedulerCache,
    "cache.groups[i] (scheduler)": SchedulerGroup,
    "cache.startup": Startup,
}


def _field_key(a: attrs.Attribute[Any]) -> str:
    return str(a.metadata.get("key", a.name))


def key_set(cls: type) -> KeySet:
    """The key set of a record class: its keys in record order, the :data:`ABSENT`-default ones optional."""
    fields = attrs.fields(cls)
    return KeySet(
        tuple(_field_key(a) for a in fields if a.default is not ABSENT),
        tuple(_field_key(a) for a in fields if a.default is ABSENT),
    )


#: 02 §3.13, row by row, derived from :data:`RECORD_OBJECTS`.
KEY_SETS: dict[str, KeySet] = {name: key_set(cls) for name, cls in RECORD_OBJECTS.items()}


# --------------------------------------------------------------------------
# the converter's hooks
# --------------------------------------------------------------------------


def _is_absent_union(t: Any) -> bool:
    return typing.get_origin(t) in (Union, types.UnionType) and Absent in typing.get_args(t)


def _structure_present(value: Any, t: Any) -> Any:
    """A present optional key: its value as the field's type without :class:`Absent`."""
    rest = tuple(a for a in typing.get_args(t) if a is not Absent)
    return converter.structure(value, rest[0] if len(rest) == 1 else Union[rest])  # type: ignore[arg-type]  # noqa: UP007


converter.register_structure_hook_func(_is_absent_union, _structure_present)


def _unstructure(obj: Any) -> dict[str, Any]:
    """A record object as JSON: its keys in field order, :data:`ABSENT` ones left out."""
    return {
        _field_key(a): converter.unstructure(value)
        for a in attrs.fields(type(obj))
        if (value := getattr(obj, a.name)) is not ABSENT
    }


_RECORD_CLASSES = frozenset(RECORD_OBJECTS.values())


def _is_record_class(t: Any) -> bool:
    return isinstance(t, type) and t in _RECORD_CLASSES


def _record_structure_hook(cls: type) -> Any:
    """The structure function of one record class (its keys renamed, unknown keys refused), generated
    when a record is first read, not when this module is imported; the converter keeps it."""
    attrs.resolve_types(cls, globals())
    renamed = {a.name: override(rename=a.metadata["key"]) for a in attrs.fields(cls) if "key" in a.metadata}
    return make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True, **renamed)  # type: ignore[arg-type]


converter.register_structure_hook_factory(_is_record_class, _record_structure_hook)
for _cls in RECORD_OBJECTS.values():
    converter.register_unstructure_hook(_cls, _unstructure)


def record_to_json(record: WorkerRecord | SchedulerRecord) -> dict[str, Any]:
    """The JSON-ready dict of a record: keys in record order, :data:`ABSENT` keys left out."""
    return converter.unstructure(record)  # type: ignore[no-any-return]


def record_from_json(data: Mapping[str, Any]) -> WorkerRecord | SchedulerRecord:
    """A record from its parsed JSON, by ``binding.kind``; raises on a key or value off the classes' shape."""
    binding = data.get("binding") if isinstance(data, Mapping) else None
    kind = binding.get("kind") if isinstance(binding, Mapping) else None
    cls = SchedulerRecord if kind == "scheduler" else WorkerRecord
    return converter.structure(data, cls)  # type: ignore[return-value]


# Scalar types the spec fixes (02 §3.2-§3.11); anything else is left open here.
_INT = {"type": "integer"}
_INT_OR_NULL = {"type": ["integer", "null"]}
_STR = {"type": "string"}
_STR_OR_NULL = {"type": ["string", "null"]}
_BOOL = {"type": "boolean"}
_OPEN_OBJECT = {"type": "object"}
_TYPES: dict[str, dict[str, Any]] = {
    "schema_version": {"const": SCHEMA_VERSION},
    "unresolved_fields": {"type": "array", "items": _STR},
    "error": _STR_OR_NULL,
    "launch": _OPEN_OBJECT,
    "settings": _OPEN_OBJECT,
    "prefix_caching": _OPEN_OBJECT,
    "source_files": {"type": "object", "additionalProperties": _STR},
    "fields": _OPEN_OBJECT,
    "spec_fields": _OPEN_OBJECT,
    "configuration": _STR,
    "phase": {"enum": ["prefill", "decode"]},
    "attempt_id": _STR,
    "dp": _INT,
    "tp": _INT_OR_NULL,
    "pp": _INT_OR_NULL,
    "group_id": _INT,
    "spec_class": _STR,
    "kind": _STR,
    "layer_names": {"type": "array", "items": _STR},
    "layers": {"type": "array", "items": _STR},
    "block_size_tokens": _INT,
    "page_size_bytes": _INT,
    "sliding_window": _INT_OR_NULL,
    "prefix_cacheable": _BOOL,
    "host_resident": _BOOL,
    "role": _STR,
    "startup_blocks_per_request": _INT_OR_NULL,
    "num_blocks": _INT,
    "free_blocks": _INT,
    "storage_id": _STR,
    "size_bytes": _INT,
    "size": _INT,
    "layer_stride": _INT_OR_NULL,
    "block_stride": _INT,
    "offset": _INT,
    "kernel_block_stride": _INT,
    "placement": _STR,
}


def _object(name: str, nested: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ks = KEY_SETS[name]
    props = {k: nested.get(k, _TYPES.get(k, {})) for k in (*ks.required, *ks.optional)}
    return {"type": "object", "properties": props, "required": list(ks.required), "additionalProperties": False}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def record_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a worker or scheduler record (02 §3.13 key sets)."""
    layer_spec = _object("cache.groups[i].layer_specs.<layer>", {})
    worker_group = _object(
        "cache.groups[i] (worker)",
        {"state": _object("cache.groups[i].state", {}),
         "layer_specs": {"type": "object", "additionalProperties": layer_spec}},
    )  # fmt: skip
    worker_cache = _object(
        "cache (worker)",
        {
            "storages": {"type": "array", "items": _object("cache.storages[i]", {})},
            "allocations": {"type": "array", "items": _object("cache.allocations[i]", {})},
            "groups": {"type": "array", "items": worker_group},
            "layer_views": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": _object("cache.layer_views.<layer>[j]", {})},
            },
            "attention_groups": _nullable({"type": "array", "items": _object("cache.attention_groups[j]", {})}),
            "model_runner": _nullable(_object("cache.model_runner", {})),
            "kv_cache_layout": _STR_OR_NULL,
        },
    )
    scheduler_cache = _object(
        "cache (scheduler)",
        {"groups": {"type": "array", "items": _object("cache.groups[i] (scheduler)", {})},
         "startup": _nullable(_object("cache.startup", {})),
         "reserved_block_ids": {"type": "array", "items": _INT}},
    )  # fmt: skip
    common = {
        "binding": _object("binding", {"rank": _object("binding.rank", {}),
                                       "kind": {"enum": ["worker", "scheduler"]}}),
        "runtime": _object("runtime", {}),
        "observer": _object("observer", {}),
        "model": _object("model", {}),
        "hardware": _object("hardware", {}),
    }  # fmt: skip
    worker = _object("worker record", {**common, "lifecycle": _object("lifecycle (worker)", {}), "cache": worker_cache})
    scheduler = _object(
        "scheduler record", {**common, "lifecycle": _object("lifecycle (scheduler)", {}), "cache": scheduler_cache}
    )
    worker["properties"]["binding"]["properties"]["kind"] = {"const": "worker"}
    scheduler["properties"]["binding"] = {
        **common["binding"],
        "properties": {**common["binding"]["properties"], "kind": {"const": "scheduler"}},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://fpmcore.invalid/schema/runtime-observation/v1",
        "title": SCHEMA_VERSION,
        "description": "A runtime observation record (one rank, one phase); see 02-observation-and-import.md §3.",
        "oneOf": [worker, scheduler],
    }

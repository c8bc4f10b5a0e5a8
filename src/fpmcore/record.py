"""The runtime observation record ``fpmcore-runtime-observation/v1`` (02 §3): key sets and JSON Schema.

:data:`KEY_SETS` is the table of 02 §3.13, the one place the closed key set of
every record object is written down; the import's I-13 and
:func:`record_json_schema` both read it.  Values are checked by the import
rules, not here; the schema states the shape (required and optional keys,
scalar types where the spec fixes them).
"""

from __future__ import annotations

from typing import Any

import attrs

SCHEMA_VERSION = "fpmcore-runtime-observation/v1"


@attrs.frozen
class KeySet:
    """Required and optional keys of one record object (02 §3.13)."""

    required: tuple[str, ...]
    optional: tuple[str, ...] = ()

    @property
    def allowed(self) -> frozenset[str]:
        return frozenset(self.required) | frozenset(self.optional)


_WORKER_TOP = ("schema_version", "binding", "runtime", "observer", "launch", "model", "settings",
               "lifecycle", "hardware", "cache", "unresolved_fields", "error")  # fmt: skip

#: 02 §3.13, row by row.  ``<layer>`` stands for any layer name.
KEY_SETS: dict[str, KeySet] = {
    "worker record": KeySet(_WORKER_TOP, ("prefix_caching",)),
    "scheduler record": KeySet(tuple(k for k in _WORKER_TOP if k != "hardware"), ("prefix_caching",)),
    "binding": KeySet(("configuration", "phase", "attempt_id", "kind", "rank")),
    "binding.rank": KeySet(("dp", "tp", "pp")),
    "runtime": KeySet(("framework", "version", "source_revision", "source_files", "image")),
    "observer": KeySet(("plugin", "version", "source_sha256")),
    "model": KeySet(("path", "revision", "config_sha256", "loaded_config_commit")),
    "lifecycle (worker)": KeySet(("measurement", "cache_initialized", "warmup_completed", "capture_completed")),
    "lifecycle (scheduler)": KeySet(("measurement", "cache_initialized")),
    "hardware": KeySet(("gpu", "sm", "device_name", "total_memory_bytes")),
    "cache (worker)": KeySet(("num_blocks", "available_cache_bytes", "allocated_cache_bytes", "kv_cache_layout",
                              "storages", "allocations", "groups", "layer_views", "attention_groups",
                              "model_runner", "placement")),  # fmt: skip
    "cache.storages[i]": KeySet(("storage_id", "device", "pointer", "size_bytes")),
    "cache.allocations[i]": KeySet(("storage_id", "size", "layers", "layer_stride", "block_stride", "offset")),
    "cache.groups[i] (worker)": KeySet(
        ("group_id", "spec_class", "kind", "layer_names", "block_size_tokens", "page_size_bytes",
         "sliding_window", "prefix_cacheable", "host_resident", "role", "startup_blocks_per_request"),
        ("state", "layer_specs"),
    ),  # fmt: skip
    "cache.groups[i].state": KeySet(
        ("blocks_per_request",),
        ("num_speculative_blocks", "num_prefill_checkpoint_blocks", "prefill_checkpoint_alignment",
         "mamba_cache_mode"),
    ),  # fmt: skip
    "cache.groups[i].layer_specs.<layer>": KeySet(("class", "block_size", "page_size_bytes", "fields")),
    "cache.layer_views.<layer>[j]": KeySet(
        ("storage_id", "storage_offset_bytes", "dtype", "shape", "stride_bytes", "element_size_bytes",
         "block_axis", "kernel_block_size_tokens"),
        ("kernel_block_stride",),
    ),  # fmt: skip
    "cache.attention_groups[j]": KeySet(
        ("kv_cache_group_id", "backend", "layer_names", "kernel_block_size", "kernel_block_stride")
    ),
    "cache.model_runner": KeySet(("class", "version", "kernel_block_sizes")),
    "cache (scheduler)": KeySet(("num_blocks", "free_blocks", "null_block_id", "reserved_block_ids",
                                 "watermark_blocks", "pool_count", "block_size", "hash_block_size",
                                 "cache_hit_alignment_tokens", "mamba_cache_mode", "groups", "startup")),  # fmt: skip
    "cache.groups[i] (scheduler)": KeySet(
        ("group_id", "layer_names", "spec_class", "block_size_tokens", "page_size_bytes", "sliding_window",
         "prefix_cacheable", "host_resident", "role", "startup_blocks_per_request"),
        ("spec_fields",),
    ),  # fmt: skip
    "cache.startup": KeySet(("max_model_len", "max_in_flight_tokens", "kv_cache_size_tokens"),
                            ("kv_cache_max_concurrency",)),  # fmt: skip
}

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

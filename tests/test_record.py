"""The runtime observation record (02 §3) as attrs classes: the key sets, the written form, the strict reading."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError

from fpmcore.documents import record as R
from fpmcore.documents.schema import converter

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_RECORDS = sorted((ROOT / "examples" / "probes").glob("*/*/*/runtime-observation-*.json"))

#: 02 §3.13, row by row, as the spec writes it (the classes must give exactly this).
TABLE_3_13 = {
    "worker record": (("schema_version", "binding", "runtime", "observer", "launch", "model", "settings", "lifecycle",
                       "hardware", "cache", "unresolved_fields", "error"), ("prefix_caching",)),
    "scheduler record": (("schema_version", "binding", "runtime", "observer", "launch", "model", "settings",
                          "lifecycle", "cache", "unresolved_fields", "error"), ("prefix_caching",)),
    "binding": (("configuration", "phase", "attempt_id", "kind", "rank"), ()),
    "binding.rank": (("dp", "tp", "pp"), ()),
    "runtime": (("framework", "version", "source_revision", "source_files", "image"), ()),
    "observer": (("plugin", "version", "source_sha256"), ()),
    "model": (("path", "revision", "config_sha256", "loaded_config_commit"), ()),
    "lifecycle (worker)": (("measurement", "cache_initialized", "warmup_completed", "capture_completed"), ()),
    "lifecycle (scheduler)": (("measurement", "cache_initialized"), ()),
    "hardware": (("gpu", "sm", "device_name", "total_memory_bytes"), ()),
    "cache (worker)": (("num_blocks", "available_cache_bytes", "allocated_cache_bytes", "kv_cache_layout", "storages",
                        "allocations", "groups", "layer_views", "attention_groups", "model_runner", "placement"), ()),
    "cache.storages[i]": (("storage_id", "device", "pointer", "size_bytes"), ()),
    "cache.allocations[i]": (("storage_id", "size", "layers", "layer_stride", "block_stride", "offset"), ()),
    "cache.groups[i] (worker)": (("group_id", "spec_class", "kind", "layer_names", "block_size_tokens",
                                  "page_size_bytes", "sliding_window", "prefix_cacheable", "host_resident", "role",
                                  "startup_blocks_per_request"), ("state", "layer_specs")),
    "cache.groups[i].state": (("blocks_per_request",), ("num_speculative_blocks", "num_prefill_checkpoint_blocks",
                                                        "prefill_checkpoint_alignment", "mamba_cache_mode")),
    "cache.groups[i].layer_specs.<layer>": (("class", "block_size", "page_size_bytes", "fields"), ()),
    "cache.layer_views.<layer>[j]": (("storage_id", "storage_offset_bytes", "dtype", "shape", "stride_bytes",
                                      "element_size_bytes", "block_axis", "kernel_block_size_tokens"),
                                     ("kernel_block_stride",)),
    "cache.attention_groups[j]": (("kv_cache_group_id", "backend", "layer_names", "kernel_block_size",
                                   "kernel_block_stride"), ()),
    "cache.model_runner": (("class", "version", "kernel_block_sizes"), ()),
    "cache (scheduler)": (("num_blocks", "free_blocks", "null_block_id", "reserved_block_ids", "watermark_blocks",
                           "pool_count", "block_size", "hash_block_size", "cache_hit_alignment_tokens",
                           "mamba_cache_mode", "groups", "startup"), ()),
    "cache.groups[i] (scheduler)": (("group_id", "layer_names", "spec_class", "block_size_tokens", "page_size_bytes",
                                     "sliding_window", "prefix_cacheable", "host_resident", "role",
                                     "startup_blocks_per_request"), ("spec_fields",)),
    "cache.startup": (("max_model_len", "max_in_flight_tokens", "kv_cache_size_tokens"), ("kv_cache_max_concurrency",)),
}  # fmt: skip


def test_key_sets_are_the_table_of_3_13():
    assert {name: (ks.required, ks.optional) for name, ks in R.KEY_SETS.items()} == TABLE_3_13


def test_examples_are_there():
    assert len(EXAMPLE_RECORDS) == 48


@pytest.mark.parametrize("path", EXAMPLE_RECORDS, ids=lambda p: "/".join(p.parts[-4:]))
def test_every_example_record_reads_and_writes_to_the_same_bytes(path):
    """Through the one converter: the written form is the record's key order, absent optional keys left out."""
    raw = path.read_bytes()
    rec = R.record_from_json(json.loads(raw))
    assert isinstance(rec, R.SchedulerRecord if "scheduler" in path.name else R.WorkerRecord)
    assert (json.dumps(R.record_to_json(rec), indent=1, ensure_ascii=False) + "\n").encode() == raw


def _scheduler() -> dict:
    path = next(p for p in EXAMPLE_RECORDS if "glm53flash-tp4/" in p.as_posix() and "scheduler" in p.name)
    return json.loads(path.read_bytes())


def test_absent_and_null_are_two_things():
    data = _scheduler()
    rec = R.record_from_json(data)
    assert rec.cache.startup.kv_cache_max_concurrency == data["cache"]["startup"]["kv_cache_max_concurrency"]
    absent = attrs.evolve(rec.cache.startup, kv_cache_max_concurrency=R.ABSENT)
    null = attrs.evolve(rec.cache.startup, kv_cache_max_concurrency=None)
    assert "kv_cache_max_concurrency" not in converter.unstructure(absent)
    assert converter.unstructure(null)["kv_cache_max_concurrency"] is None
    assert converter.structure(converter.unstructure(absent), R.Startup) == absent
    assert list(converter.unstructure(rec.cache.groups[0]))[-1] == "spec_fields"
    group = attrs.evolve(rec.cache.groups[0], spec_fields=R.ABSENT)
    assert "spec_fields" not in converter.unstructure(group)


def _causes(exc: BaseException, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], BaseException]]:
    """``(classes being structured, innermost error)`` of a cattrs error tree."""
    if isinstance(exc, ClassValidationError):
        name = exc.cl.__name__
        return [c for sub in exc.exceptions for c in _causes(sub, (*path, name))]
    return [(path, exc)]


@pytest.mark.parametrize(
    ("edit", "where", "error", "text"),
    [
        (lambda d: d["binding"].__setitem__("phase", 1), "Binding", TypeError, "expected str, got 1"),
        (lambda d: d["cache"].__setitem__("free_blocks", True), "SchedulerCache", TypeError, "expected int, got true"),
        (lambda d: d["cache"].__setitem__("num_blocks", 13697.0), "SchedulerCache", TypeError, "expected int, got 13697.0"),
        (lambda d: d["cache"].__setitem__("verdict", "ok"), "SchedulerCache", ForbiddenExtraKeysError, "verdict"),
        (lambda d: d["binding"].pop("attempt_id"), "Binding", KeyError, "attempt_id"),
    ],
)  # fmt: skip
def test_reading_is_strict(edit, where, error, text):
    """The one converter's strict scalars (``true`` is no integer, ``13697.0`` neither) and closed key sets."""
    data = _scheduler()
    edit(data)
    with pytest.raises(ClassValidationError) as info:
        R.record_from_json(data)
    ((path, cause),) = _causes(info.value)
    assert path == ("SchedulerRecord", where) and isinstance(cause, error) and text in str(cause)

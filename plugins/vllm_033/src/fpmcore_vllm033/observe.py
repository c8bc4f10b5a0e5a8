"""Probe side of *observe cache groups* for vLLM 0.33.0 (02 §3).

:func:`build_record` turns the live objects of one vLLM 0.33.0 process into
one ``fpmcore-runtime-observation/v1`` record: a worker record (02 §3.6-§3.10)
or a scheduler record (02 §3.11).  It reads only what vLLM holds; a value it
cannot read is ``null`` and its key path is listed in ``unresolved_fields``
(02 §3.12).  It never writes a verdict.

vLLM and torch are imported inside the functions only, so that importing this
module (and the plugin) never needs them.

The ``source`` mapping (``fpm_observe_cache_groups``) holds, by name:

``kind``
    ``"worker"`` (default) or ``"scheduler"``.
``dp_rank``
    the data-parallel rank (default 0).
``launch``
    the launch manifest of the phase (02 §2.2); the record copies its
    ``launch`` and takes its binding (configuration, attempt) from it.
``vllm_config``, ``kv_cache_config``
    the process's ``VllmConfig`` and ``KVCacheConfig`` (the worker's, or the
    scheduler's copy).
``kv_caches``
    worker only, optional: layer name → the tensor (or tuple of tensors, one
    per Mamba state) bound to the layer.  Absent or ``None`` when the tensors
    are not allocated: the record then lists the tensor evidence as unresolved.
``model_runner``
    worker only, optional: the model runner (``attn_groups``,
    ``kernel_block_sizes``).
``scheduler``
    scheduler only: the live ``Scheduler`` (block sizes, block pool).
``available_cache_bytes``
    worker only, optional: the memory the profiler handed to cache planning.
``hardware``
    worker only, optional: ``{gpu, sm, device_name, total_memory_bytes}``;
    without it the observer asks torch for the CUDA device of the process.
``lifecycle``
    optional ``{measurement, cache_initialized, warmup_completed,
    capture_completed}`` set by the probe runner at the moment of observation
    (a worker's ``measurement`` defaults to ``after_warmup``).
``model``
    optional ``{path, revision, config_sha256, loaded_config_commit}``;
    without it the observer reads the loaded model configuration (02 §3.3).
``image``, ``source_revision``
    optional: the container image and the vLLM commit the runner knows.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

SCHEMA = "fpmcore-runtime-observation/v1"
PLUGIN = "fpmcore-vllm033"
FRAMEWORK_VERSION = "0.33.0"

#: The installed vLLM files whose objects the observer reads (02 §3.3).
SOURCE_FILES: tuple[str, ...] = (
    "vllm/config/cache.py",
    "vllm/config/compilation.py",
    "vllm/config/model.py",
    "vllm/config/parallel.py",
    "vllm/config/scheduler.py",
    "vllm/config/vllm.py",
    "vllm/v1/core/block_pool.py",
    "vllm/v1/core/kv_cache_manager.py",
    "vllm/v1/core/kv_cache_planning.py",
    "vllm/v1/core/kv_cache_utils.py",
    "vllm/v1/core/sched/scheduler.py",
    "vllm/v1/kv_cache_interface.py",
    "vllm/v1/worker/utils.py",
)

_SPEC_MODULE = "vllm.v1.kv_cache_interface"


# --------------------------------------------------------------------------
# value encoding (02 §3.7 "Field encoding in fields")
# --------------------------------------------------------------------------


def encode_value(value: Any) -> Any:
    """Encode one spec or config field as JSON (02 §3.7).

    torch dtypes become ``"torch.<name>"``, tuples lists, enums their member
    name, ``MultipleOf(n)`` ``{"multiple_of": n}``, a ``Fraction`` ``"a/b"``
    and ``None`` ``null``.  Nested dataclasses become objects of their fields.
    """
    if isinstance(value, enum.Enum):
        return value.name
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Fraction):
        return f"{value.numerator}/{value.denominator}"
    if type(value).__name__ == "MultipleOf" and hasattr(value, "base"):
        return {"multiple_of": int(value.base)}
    if type(value).__name__ == "dtype" and type(value).__module__ == "torch":
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): encode_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [encode_value(v) for v in items]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode_value(getattr(value, f.name, None)) for f in dataclasses.fields(value)}
    return str(value)


def class_name(obj: Any) -> str:
    """Fully qualified class name, ``vllm.v1.kv_cache_interface.MambaSpec``."""
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def spec_fields(spec: Any) -> dict[str, Any]:
    """Every dataclass field of a spec by name, encoded (02 §3.7)."""
    return {f.name: encode_value(getattr(spec, f.name, None)) for f in dataclasses.fields(spec)}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------
# small readers
# --------------------------------------------------------------------------


class _Unresolved:
    """Collects the key paths the observer could not read (02 §3.12)."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def add(self, path: str) -> None:
        if path not in self.paths:
            self.paths.append(path)

    def value(self, path: str, value: Any) -> Any:
        if value is None:
            self.add(path)
        return value


def _sha256_file(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def observer_identity() -> dict[str, Any]:
    """``{plugin, version, source_sha256}`` of this observer (02 §3.3)."""
    from importlib import metadata

    try:
        version = metadata.version(PLUGIN)
    except metadata.PackageNotFoundError:  # pragma: no cover - not installed
        version = None
    return {"plugin": PLUGIN, "version": version, "source_sha256": _sha256_file(__file__)}


def runtime_identity(source: Mapping[str, Any], unresolved: _Unresolved) -> dict[str, Any]:
    """``runtime`` (02 §3.3): vLLM's own version string, never normalized."""
    import vllm

    root = os.path.dirname(os.path.dirname(os.path.abspath(vllm.__file__)))
    files: dict[str, Any] = {}
    for rel in SOURCE_FILES:
        digest = _sha256_file(os.path.join(root, rel))
        if digest is None:
            unresolved.add(f"runtime.source_files.{rel}")
        files[rel] = digest
    revision = source.get("source_revision")
    if revision is None:
        commit = getattr(vllm, "__commit_id__", None) or ""
        commit = commit[1:] if commit.startswith("g") else commit
        if len(commit) in (40, 64) and all(c in "0123456789abcdef" for c in commit):
            revision = commit
    return {
        "framework": "vllm",
        "version": vllm.__version__,
        "source_revision": unresolved.value("runtime.source_revision", revision),
        "source_files": files,
        "image": unresolved.value("runtime.image", source.get("image")),
    }


def model_identity(source: Mapping[str, Any], vllm_config: Any, unresolved: _Unresolved) -> dict[str, Any]:
    """``model`` (02 §3.3).  The commit is read from the instance dictionary only."""
    given = source.get("model")
    if given is not None:
        out = {k: given.get(k) for k in ("path", "revision", "config_sha256", "loaded_config_commit")}
    else:
        mc = vllm_config.model_config
        hf = getattr(mc, "hf_config", None)
        commit = vars(hf).get("_commit_hash") if hf is not None else None
        if not (isinstance(commit, str) and len(commit) == 40):
            commit = None
        config_path = os.path.join(str(mc.model), "config.json")
        out = {
            "path": mc.model,
            "revision": mc.revision,
            "config_sha256": _sha256_file(config_path) if os.path.isdir(str(mc.model)) else None,
            "loaded_config_commit": commit,
        }
    for key in ("path", "revision", "config_sha256"):
        unresolved.value(f"model.{key}", out[key])
    return out


def settings(vllm_config: Any, kv_cache_config: Any, unresolved: _Unresolved) -> dict[str, Any]:
    """The resolved vLLM settings of this process (02 §3.4)."""
    vc = vllm_config
    mc, cc, sc, pc, comp = (
        vc.model_config,
        vc.cache_config,
        vc.scheduler_config,
        vc.parallel_config,
        vc.compilation_config,
    )
    offload = getattr(vc, "offload_config", None)
    uva = getattr(offload, "uva", None)
    layout = getattr(cc, "kv_cache_layout", None)
    return {
        "model": {"max_model_len": mc.max_model_len, "dtype": encode_value(mc.dtype)},
        "cache": {
            "block_size": cc.block_size,
            "gpu_memory_utilization": cc.gpu_memory_utilization,
            "enable_prefix_caching": bool(cc.enable_prefix_caching),
            "mamba_cache_mode": encode_value(cc.mamba_cache_mode),
            "mamba_block_size": cc.mamba_block_size,
            "prefix_match_unit": cc.prefix_match_unit,
            "hash_block_size": unresolved.value(
                "settings.cache.hash_block_size", getattr(kv_cache_config, "hash_block_size", None)
            ),
            "kv_cache_dtype": encode_value(cc.cache_dtype),
            "kv_cache_layout": unresolved.value(
                "settings.cache.kv_cache_layout", None if layout is None else encode_value(layout)
            ),
            "num_gpu_blocks_override": cc.num_gpu_blocks_override,
            "kv_cache_memory_bytes": cc.kv_cache_memory_bytes,
            "cpu_offload_gb": getattr(uva, "cpu_offload_gb", None),
            "prefix_cache_retention_interval": cc.prefix_cache_retention_interval,
        },
        "scheduler": {
            "max_num_batched_tokens": sc.max_num_batched_tokens,
            "max_num_seqs": sc.max_num_seqs,
            "async_scheduling": bool(sc.async_scheduling),
            "enable_chunked_prefill": bool(sc.enable_chunked_prefill),
            "max_in_flight_tokens": vc.max_in_flight_tokens,
        },
        "parallel": {
            "tensor_parallel_size": pc.tensor_parallel_size,
            "pipeline_parallel_size": pc.pipeline_parallel_size,
            "data_parallel_size": pc.data_parallel_size,
            "decode_context_parallel_size": pc.decode_context_parallel_size,
            "prefill_context_parallel_size": getattr(pc, "prefill_context_parallel_size", 1),
            "enable_expert_parallel": bool(pc.enable_expert_parallel),
            "enable_eplb": bool(pc.enable_eplb),
        },
        "compilation": {
            "mode": encode_value(comp.mode),
            "cudagraph_mode": encode_value(comp.cudagraph_mode),
            "cudagraph_capture_sizes": encode_value(list(comp.cudagraph_capture_sizes or [])),
            "max_cudagraph_capture_size": comp.max_cudagraph_capture_size,
            "enforce_eager": bool(mc.enforce_eager),
        },
        "model_runner": "v2" if getattr(vc, "use_v2_model_runner", False) else "v1",
        "speculative": encode_value(vc.speculative_config),
        "kv_transfer": encode_value(vc.kv_transfer_config),
    }


def prefix_caching(vllm_config: Any, hash_block_size: Any, unresolved: _Unresolved) -> dict[str, Any]:
    """``prefix_caching`` (02 §3.5)."""
    cc = vllm_config.cache_config
    return {
        "enable_prefix_caching": bool(cc.enable_prefix_caching),
        "mamba_cache_mode": encode_value(cc.mamba_cache_mode),
        "hash_block_size": unresolved.value("prefix_caching.hash_block_size", hash_block_size),
    }


# --------------------------------------------------------------------------
# cache groups (02 §3.7, §3.11)
# --------------------------------------------------------------------------


def _layer_spec(group: Any, layer: str) -> Any:
    from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs

    spec = group.kv_cache_spec
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return spec.kv_cache_specs[layer]
    return spec


def _kind(group: Any) -> str:
    """The kind of the group by the class table of 02 §5.2 (I-43)."""
    from fpmcore_vllm033.classes import classify

    kinds = [classify(class_name(_layer_spec(group, name))).kind for name in group.layer_names]
    top = classify(class_name(group.kv_cache_spec))
    if not top.uniform:
        return top.kind
    return kinds[0] if kinds else top.kind


def _startup_blocks(spec: Any, vllm_config: Any, path: str, unresolved: _Unresolved) -> int | None:
    """C-1: ``cdiv(spec.max_memory_usage_bytes(vllm_config), spec.page_size_bytes)``."""
    try:
        return cdiv(int(spec.max_memory_usage_bytes(vllm_config)), int(spec.page_size_bytes))
    except (NotImplementedError, AttributeError, TypeError, ZeroDivisionError):
        unresolved.add(path)
        return None


def _state(spec: Any) -> dict[str, Any] | None:
    """02 §3.7.1: the steady count and the checkpoint fields of a state group."""
    from vllm.v1.kv_cache_interface import CircularBufferSpec, MambaSpec

    if isinstance(spec, MambaSpec):
        return {
            "blocks_per_request": 1 + spec.num_speculative_blocks,
            "num_speculative_blocks": spec.num_speculative_blocks,
            "num_prefill_checkpoint_blocks": spec.num_prefill_checkpoint_blocks,
            "prefill_checkpoint_alignment": spec.prefill_checkpoint_alignment,
            "mamba_cache_mode": encode_value(spec.mamba_cache_mode),
        }
    if isinstance(spec, CircularBufferSpec):
        return {"blocks_per_request": 1}
    return None


def _group_common(gid: int, group: Any, spec: Any, vllm_config: Any, prefix: str, unresolved: _Unresolved) -> dict:
    from vllm.v1.kv_cache_interface import get_kv_cache_spec_sliding_window

    return {
        "block_size_tokens": spec.block_size,
        "page_size_bytes": spec.page_size_bytes,
        "sliding_window": get_kv_cache_spec_sliding_window(spec),
        "prefix_cacheable": bool(spec.prefix_cacheable),
        "host_resident": bool(group.host_resident),
        "role": encode_value(getattr(group.role, "value", group.role)),
        "startup_blocks_per_request": _startup_blocks(
            spec, vllm_config, f"{prefix}[{gid}].startup_blocks_per_request", unresolved
        ),
    }


def worker_group(gid: int, group: Any, vllm_config: Any, unresolved: _Unresolved) -> dict[str, Any]:
    """One worker group record (02 §3.7), keys in the row order of the table."""
    spec = group.kv_cache_spec
    kind = _kind(group)
    record: dict[str, Any] = {
        "group_id": gid,
        "spec_class": class_name(spec),
        "kind": kind,
        "layer_names": list(group.layer_names),
        **_group_common(gid, group, spec, vllm_config, "cache.groups", unresolved),
    }
    if kind == "state":
        state = _state(_layer_spec(group, group.layer_names[0]))
        if state is not None:
            record["state"] = state
    record["layer_specs"] = {
        name: {
            "class": class_name(layer),
            "block_size": layer.block_size,
            "page_size_bytes": layer.page_size_bytes,
            "fields": spec_fields(layer),
        }
        for name in group.layer_names
        for layer in (_layer_spec(group, name),)
    }
    return record


def scheduler_group(gid: int, group: Any, vllm_config: Any, unresolved: _Unresolved) -> dict[str, Any]:
    """One scheduler group copy (02 §3.11): the engine core's spec, first layer for uniform groups."""
    spec = group.kv_cache_spec
    return {
        "group_id": gid,
        "layer_names": list(group.layer_names),
        "spec_class": class_name(spec),
        **_group_common(gid, group, spec, vllm_config, "cache.groups", unresolved),
        "spec_fields": spec_fields(spec),
    }


# --------------------------------------------------------------------------
# worker tensors (02 §3.8, §3.9, §3.10)
# --------------------------------------------------------------------------


def _tensors_of(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_of(v)]
    return [value]


def _storage_key(tensor: Any) -> tuple[str, int]:
    storage = tensor.untyped_storage()
    return str(tensor.device), int(storage._cdata)


class _Storages:
    """Distinct backing allocations, numbered ``s0``, ``s1``, … in first-use order."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, int], str] = {}
        self.records: list[dict[str, Any]] = []

    def id_of(self, tensor: Any) -> str:
        key = _storage_key(tensor)
        if key not in self.ids:
            storage = tensor.untyped_storage()
            sid = f"s{len(self.records)}"
            self.ids[key] = sid
            self.records.append(
                {
                    "storage_id": sid,
                    "device": str(tensor.device),
                    "pointer": int(storage.data_ptr()),
                    "size_bytes": int(storage.nbytes()),
                }
            )
        return self.ids[key]


def _attention_groups(model_runner: Any) -> list[Any]:
    groups = getattr(model_runner, "attn_groups", None) or []
    return [g for per_group in groups for g in (per_group if isinstance(per_group, (list, tuple)) else [per_group])]


def _view_record(
    tensor: Any, storages: _Storages, kernel_block: int, kernel_stride: int
) -> dict[str, Any]:
    esize = int(tensor.element_size())
    return {
        "storage_id": storages.id_of(tensor),
        "storage_offset_bytes": int(tensor.storage_offset()) * esize,
        "dtype": str(tensor.dtype),
        "shape": [int(x) for x in tensor.shape],
        "stride_bytes": [int(s) * esize for s in tensor.stride()],
        "element_size_bytes": esize,
        "block_axis": 0,
        "kernel_block_size_tokens": kernel_block,
        "kernel_block_stride": kernel_stride,
    }


def worker_cache(source: Mapping[str, Any], unresolved: _Unresolved) -> dict[str, Any]:
    """The worker ``cache`` object (02 §3.6)."""
    vc = source["vllm_config"]
    kcc = source["kv_cache_config"]
    kv_caches = source.get("kv_caches")
    runner = source.get("model_runner")
    groups = list(kcc.kv_cache_groups)

    placement = "shared_pool"
    if any(g.host_resident or getattr(g.role, "value", g.role) != "default" for g in groups):
        placement = "hisparse"
        unresolved.add("cache.groups")

    storages = _Storages()
    layer_views: dict[str, list[dict[str, Any]]] = {}
    attention_groups: list[dict[str, Any]] | None = None
    model_runner: dict[str, Any] | None = None
    kernel_block_sizes = list(getattr(runner, "kernel_block_sizes", None) or []) if runner is not None else []

    ag_of: dict[str, Any] = {}
    if runner is not None:
        attention_groups = []
        for ag in _attention_groups(runner):
            attention_groups.append(
                {
                    "kv_cache_group_id": ag.kv_cache_group_id,
                    "backend": ag.backend.get_name(),
                    "layer_names": list(ag.layer_names),
                    "kernel_block_size": ag.kernel_block_size,
                    "kernel_block_stride": int(ag.kernel_block_stride),
                }
            )
            for name in ag.layer_names:
                ag_of[name] = ag
        model_runner = {
            "class": class_name(runner),
            "version": "v2" if getattr(vc, "use_v2_model_runner", False) else "v1",
            "kernel_block_sizes": unresolved.value(
                "cache.model_runner.kernel_block_sizes", kernel_block_sizes or None
            ),
        }
    else:
        unresolved.add("cache.attention_groups")
        unresolved.add("cache.model_runner")

    if kv_caches is None:
        unresolved.add("cache.storages")
        unresolved.add("cache.allocated_cache_bytes")
        unresolved.add("cache.layer_views")
    else:
        n = kcc.num_blocks
        for gid, group in enumerate(groups):
            block = group.kv_cache_spec.block_size
            for name in group.layer_names:
                tensors = _tensors_of(kv_caches.get(name))
                if not tensors:
                    unresolved.add(f"cache.layer_views.{name}")
                    continue
                ag = ag_of.get(name)
                stride = int(ag.kernel_block_stride) if ag is not None else 0
                if ag is not None and ag.kernel_block_size is not None:
                    kernel = int(ag.kernel_block_size)
                elif gid < len(kernel_block_sizes):
                    kernel = int(kernel_block_sizes[gid])
                elif int(tensors[0].shape[0]) % n == 0 and block % (int(tensors[0].shape[0]) // n) == 0:
                    # no runner: the view holds n * r kernel blocks of B // r tokens
                    kernel = block // (int(tensors[0].shape[0]) // n)
                else:
                    unresolved.add(f"cache.layer_views.{name}")
                    continue
                layer_views[name] = [_view_record(t, storages, kernel, stride) for t in tensors]

    allocations = []
    for tensor in kcc.kv_cache_tensors:
        views = _tensors_of(kv_caches.get(tensor.layers[0])) if kv_caches is not None else []
        allocations.append(
            {
                "storage_id": storages.id_of(views[0]) if views else None,
                "size": tensor.size,
                "layers": list(tensor.layers),
                "layer_stride": tensor.layer_stride,
                "block_stride": tensor.block_stride,
                "offset": tensor.offset,
            }
        )
        if not views:
            unresolved.add(f"cache.allocations[{len(allocations) - 1}].storage_id")
    allocated = sum(s["size_bytes"] for s in storages.records) if kv_caches is not None else None

    layout = getattr(kcc, "kv_cache_layout", None) or getattr(vc.cache_config, "kv_cache_layout", None)
    available = source.get("available_cache_bytes")
    return {
        "num_blocks": kcc.num_blocks,
        "available_cache_bytes": unresolved.value("cache.available_cache_bytes", available),
        "allocated_cache_bytes": allocated,
        "kv_cache_layout": unresolved.value("cache.kv_cache_layout", encode_value(layout)),
        "storages": storages.records,
        "allocations": allocations,
        "groups": [worker_group(gid, g, vc, unresolved) for gid, g in enumerate(groups)],
        "layer_views": layer_views,
        "attention_groups": attention_groups,
        "model_runner": model_runner,
        "placement": placement,
    }


def scheduler_cache(source: Mapping[str, Any], unresolved: _Unresolved) -> dict[str, Any]:
    """The scheduler ``cache`` object (02 §3.11), read right after initialization."""
    vc = source["vllm_config"]
    kcc = source["kv_cache_config"]
    sched = source["scheduler"]
    manager = sched.kv_cache_manager
    pool = manager.block_pool
    null_id = pool.null_block.block_id
    reserved = sorted({null_id} | {b.block_id for b in pool.blocks if b.ref_cnt > 0})
    cc = vc.cache_config
    return {
        "num_blocks": kcc.num_blocks,
        "free_blocks": pool.get_num_free_blocks(),
        "null_block_id": null_id,
        "reserved_block_ids": reserved,
        "watermark_blocks": int(getattr(manager, "watermark_blocks", 0)),
        "pool_count": 1 + (1 if getattr(kcc, "hisparse_host_num_blocks", None) else 0),
        "block_size": sched.block_size,
        "hash_block_size": sched.hash_block_size,
        "cache_hit_alignment_tokens": unresolved.value(
            "cache.cache_hit_alignment_tokens", getattr(kcc, "cache_hit_alignment_tokens", None)
        ),
        "mamba_cache_mode": encode_value(cc.mamba_cache_mode),
        "groups": [scheduler_group(gid, g, vc, unresolved) for gid, g in enumerate(kcc.kv_cache_groups)],
        "startup": {
            "max_model_len": vc.model_config.max_model_len,
            "max_in_flight_tokens": vc.max_in_flight_tokens,
            "kv_cache_max_concurrency": unresolved.value(
                "cache.startup.kv_cache_max_concurrency", cc.kv_cache_max_concurrency
            ),
            "kv_cache_size_tokens": unresolved.value("cache.startup.kv_cache_size_tokens", cc.kv_cache_size_tokens),
        },
    }


def hardware(source: Mapping[str, Any], rank: int, unresolved: _Unresolved) -> dict[str, Any]:
    """``hardware`` (02 §3.1): given by the runner, or read from the CUDA device."""
    given = source.get("hardware")
    if given is None:
        given = {"gpu": None, "sm": None, "device_name": None, "total_memory_bytes": None}
        import torch

        if torch.cuda.is_available():
            device = torch.cuda.current_device()
            props = torch.cuda.get_device_properties(device)
            given.update(
                sm=props.major * 10 + props.minor,
                device_name=props.name,
                total_memory_bytes=int(props.total_memory),
            )
    out = {k: given.get(k) for k in ("gpu", "sm", "device_name", "total_memory_bytes")}
    for key, value in out.items():
        unresolved.value(f"hardware.{key}", value)
    return out


# --------------------------------------------------------------------------
# the record
# --------------------------------------------------------------------------


def build_record(source: Mapping[str, Any], *, phase: str, rank: int) -> dict[str, Any]:
    """One ``fpmcore-runtime-observation/v1`` record from live vLLM 0.33.0 objects (02 §3)."""
    import vllm

    check_runtime(vllm.__version__)
    kind = source.get("kind", "worker")
    if kind not in ("worker", "scheduler"):
        raise ValueError(f"source kind must be 'worker' or 'scheduler'; got {kind!r}")
    manifest = source["launch"]
    vc = source["vllm_config"]
    kcc = source["kv_cache_config"]
    dp = int(source.get("dp_rank", 0))
    unresolved = _Unresolved()
    flags = dict(source.get("lifecycle") or {})

    record: dict[str, Any] = {
        "schema_version": SCHEMA,
        "binding": {
            "configuration": manifest["configuration"],
            "phase": phase,
            "attempt_id": manifest["attempt_id"],
            "kind": kind,
            "rank": {"dp": dp, "tp": rank, "pp": 0} if kind == "worker" else {"dp": dp, "tp": None, "pp": None},
        },
        "runtime": runtime_identity(source, unresolved),
        "observer": observer_identity(),
        "launch": manifest["launch"],
        "model": model_identity(source, vc, unresolved),
        "settings": settings(vc, kcc, unresolved),
    }
    if kind == "worker":
        hash_block = getattr(kcc, "hash_block_size", None)
        record["prefix_caching"] = prefix_caching(vc, hash_block, unresolved)
        record["lifecycle"] = {
            "measurement": flags.get("measurement", "after_warmup"),
            "cache_initialized": bool(flags.get("cache_initialized", source.get("kv_caches") is not None)),
            "warmup_completed": bool(flags.get("warmup_completed", False)),
            "capture_completed": bool(flags.get("capture_completed", False)),
        }
        record["hardware"] = hardware(source, rank, unresolved)
        record["cache"] = worker_cache(source, unresolved)
    else:
        record["prefix_caching"] = prefix_caching(vc, source["scheduler"].hash_block_size, unresolved)
        record["lifecycle"] = {
            "measurement": "scheduler_initialized",
            "cache_initialized": bool(flags.get("cache_initialized", True)),
        }
        record["cache"] = scheduler_cache(source, unresolved)
    record["unresolved_fields"] = sorted(unresolved.paths)
    record["error"] = source.get("error")
    return record


def record_file_name(record: Mapping[str, Any]) -> str:
    """The file name of a record (02 §2.3)."""
    rank = record["binding"]["rank"]
    if record["binding"]["kind"] == "worker":
        return f"runtime-observation-worker-dp{rank['dp']}-tp{rank['tp']}-pp{rank['pp']}.json"
    return f"runtime-observation-scheduler-dp{rank['dp']}.json"


def check_runtime(version: str) -> None:
    """Hybrid evidence is written only by the exact adapter version (02 §3.12)."""
    if version != FRAMEWORK_VERSION:
        raise RuntimeError(f"the vllm_033 observer needs vLLM {FRAMEWORK_VERSION}; this process runs vLLM {version}")


__all__: Sequence[str] = (
    "SCHEMA",
    "build_record",
    "check_runtime",
    "encode_value",
    "record_file_name",
    "spec_fields",
)

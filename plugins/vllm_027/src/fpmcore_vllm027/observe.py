"""Probe side of *observe cache groups* for vLLM 0.27.0 (02 §3.14).

:func:`build_record` writes the ``fpmcore-runtime-observation/v1`` record of a
vLLM 0.27.0 process.  It never writes hybrid evidence: no ``prefix_caching``,
no ``state``/``layer_specs``/``spec_fields``, ``startup_blocks_per_request``
``null``, and the keys vLLM 0.27.0 lacks are ``null`` (the table of 02 §3.14).

The ``source`` mapping has the keys of the vLLM 0.33.0 observer
(``kind``, ``dp_rank``, ``launch``, ``vllm_config``, ``kv_cache_config``,
``kv_caches``, ``scheduler``, ``available_cache_bytes``, ``hardware``,
``lifecycle``, ``model``, ``image``, ``source_revision``), holding vLLM
0.27.0's own objects: the process must run vLLM 0.27.0.

**Allocations.**  vLLM 0.27.0's ``KVCacheTensor`` is ``(size, shared_by,
offset, block_stride)`` (vllm/v1/kv_cache_interface.py).  Each tensor is one
allocation; ``layers`` is its ``shared_by`` list (one layer of each group,
vllm/v1/core/kv_cache_utils.py ``get_kv_cache_config_from_groups``) and
``offset`` its ``offset``.  A tensor of vLLM's packed plan
(``block_stride > 0``: every tensor aliases one backing of
``block_stride × num_blocks`` bytes) is a **packed** allocation with that
``block_stride``.  Any other tensor is a separate ``torch.zeros(size)``
(gpu_model_runner ``_allocate_kv_cache_tensors``) that the attention backend
views in its own shape: with the views, ``block_stride`` is the slot when
every view walks the blocks on its outermost axis in whole slots (packed),
else 0 (whole); without views (a dry probe) it is 0 (whole), as vLLM plans it
(``block_stride`` 0, "not packed"): a separate allocation whose blocks only
the views place (02 §3.14, I-76).

vLLM and torch are imported inside the functions only.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import os
from collections.abc import Mapping
from typing import Any

SCHEMA = "fpmcore-runtime-observation/v1"
PLUGIN = "fpmcore-vllm027"
FRAMEWORK_VERSION = "0.27.0"

#: vLLM 0.27.0 (commit 4bdc8a78): the files the observer reads, with the
#: SHA-256 of their bytes in that release.
SOURCE_REVISION = "4bdc8a788d2e2ce9165d552b3d4d8b72604626bf"
SOURCE_FILES: dict[str, str] = {
    "vllm/config/model.py": "d14c60ce1b2a7d9c47983ef0df0c10c4f8083ced5bc45935e8ababfe59f22736",
    "vllm/v1/core/block_pool.py": "51cad2fd425128a0ff433ca4685acfc022e40659153ea5d7180fc586e1eebb6c",
    "vllm/v1/core/kv_cache_manager.py": "70f7f608c0963af155540630a5633483e5c19c0c0280dfd621760d5db2a419a6",
    "vllm/v1/core/kv_cache_utils.py": "0ab5385925f660395612e3f69030cad3b18c2e0bd6fb61d3ff43072a6cefb74f",
    "vllm/v1/core/sched/scheduler.py": "c67bda2886b52865ddafabaae7d797c359e930752f374421a33e537d94a5f45a",
    "vllm/v1/kv_cache_interface.py": "bfbd62f02d900faf043ce0aeb46de0a10d7ce531351fced789805a6b817a7f80",
    "vllm/v1/worker/gpu_model_runner.py": "993f2c926012241bcb8cc7f568c8e82968e4d81ca125641c831ecf501aac02ac",
    "vllm/v1/worker/utils.py": "8bdd2c60ee6443092cc0ea60e62343fd1ae6ad9a94888925bd7a83d5b4ae110d",
}


def _name(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if type(value).__name__ == "dtype" and type(value).__module__ == "torch":
        return str(value)
    return value


def _fields(obj: Any) -> Any:
    if obj is None:
        return None
    if dataclasses.is_dataclass(obj):
        return {f.name: _fields(getattr(obj, f.name, None)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_fields(v) for v in obj]
    if isinstance(obj, (bool, int, float, str)):
        return obj
    named = _name(obj)
    return named if named is not obj else str(obj)


def _sha256_file(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def class_name(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


class _Unresolved(list):
    def value(self, path: str, value: Any) -> Any:
        if value is None and path not in self:
            self.append(path)
        return value


def _runtime(source: Mapping[str, Any], version: str, unresolved: _Unresolved) -> dict[str, Any]:
    """02 §3.2: the installed vLLM's version, revision, image and the hashes of the files the observer reads."""
    import vllm

    root = os.path.dirname(os.path.dirname(os.path.abspath(vllm.__file__)))
    files = {rel: _sha256_file(os.path.join(root, rel)) for rel in SOURCE_FILES}
    revision = source.get("source_revision")
    return {
        "framework": "vllm",
        "version": version,
        "source_revision": unresolved.value("runtime.source_revision", revision),
        "source_files": files,
        "image": unresolved.value("runtime.image", source.get("image")),
    }


def _observer() -> dict[str, Any]:
    from importlib import metadata

    try:
        version = metadata.version(PLUGIN)
    except metadata.PackageNotFoundError:  # pragma: no cover
        version = None
    return {"plugin": PLUGIN, "version": version, "source_sha256": _sha256_file(__file__)}


def _settings(vc: Any) -> dict[str, Any]:
    """02 §3.4 with the keys marked ⁰ ``null`` (02 §3.14)."""
    mc, cc, sc, pc, comp = vc.model_config, vc.cache_config, vc.scheduler_config, vc.parallel_config, vc.compilation_config
    uva = getattr(getattr(vc, "offload_config", None), "uva", None)
    cpu_offload = getattr(uva, "cpu_offload_gb", getattr(cc, "cpu_offload_gb", None))
    return {
        "model": {"max_model_len": mc.max_model_len, "dtype": _name(mc.dtype)},
        "cache": {
            "block_size": cc.block_size,
            "gpu_memory_utilization": cc.gpu_memory_utilization,
            "enable_prefix_caching": bool(cc.enable_prefix_caching),
            "mamba_cache_mode": None,
            "mamba_block_size": None,
            "prefix_match_unit": None,
            "hash_block_size": None,
            "kv_cache_dtype": _name(cc.cache_dtype),
            "kv_cache_layout": None,
            "num_gpu_blocks_override": cc.num_gpu_blocks_override,
            "kv_cache_memory_bytes": getattr(cc, "kv_cache_memory_bytes", None),
            "cpu_offload_gb": cpu_offload,
            "prefix_cache_retention_interval": None,
        },
        "scheduler": {
            "max_num_batched_tokens": sc.max_num_batched_tokens,
            "max_num_seqs": sc.max_num_seqs,
            "async_scheduling": bool(sc.async_scheduling),
            "enable_chunked_prefill": bool(sc.enable_chunked_prefill),
            "max_in_flight_tokens": None,
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
            "mode": _name(comp.mode),
            "cudagraph_mode": _name(comp.cudagraph_mode),
            "cudagraph_capture_sizes": list(comp.cudagraph_capture_sizes or []),
            "max_cudagraph_capture_size": comp.max_cudagraph_capture_size,
            "enforce_eager": bool(mc.enforce_eager),
        },
        "model_runner": None,
        "speculative": _fields(vc.speculative_config),
        "kv_transfer": _fields(vc.kv_transfer_config),
    }


def _window(spec: Any) -> int | None:
    """The group window: a ``SlidingWindowSpec``'s ``sliding_window``, else ``null``."""
    return getattr(spec, "sliding_window", None) if "SlidingWindow" in type(spec).__name__ else None


def _group(gid: int, group: Any, *, worker: bool) -> dict[str, Any]:
    """A group record without hybrid evidence (02 §3.7 / §3.11, §3.14)."""
    from fpmcore_vllm027 import OTHER, TABLE

    spec = group.kv_cache_spec
    out: dict[str, Any] = {"group_id": gid}
    if worker:
        out |= {
            "spec_class": class_name(spec),
            "kind": TABLE.get(class_name(spec), OTHER).kind,
            "layer_names": list(group.layer_names),
        }
    else:
        out |= {"layer_names": list(group.layer_names), "spec_class": class_name(spec)}
    role = getattr(group, "role", "default")
    return out | {
        "block_size_tokens": spec.block_size,
        "page_size_bytes": spec.page_size_bytes,
        "sliding_window": _window(spec),
        "prefix_cacheable": bool(getattr(spec, "prefix_cacheable", True)),
        "host_resident": bool(getattr(group, "host_resident", False)),
        "role": getattr(role, "value", role),
        "startup_blocks_per_request": None,
    }


def _tensors_of(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_of(v)]
    return [value]


def _block_axis(tensor: Any, n: int) -> int:
    """The axis that walks the pool blocks: the longest-stride axis whose length is a multiple of n."""
    axes = [a for a, size in enumerate(tensor.shape) if size % n == 0]
    return max(axes, key=lambda a: tensor.stride(a)) if axes else 0


def _worker_cache(source: Mapping[str, Any], unresolved: _Unresolved) -> dict[str, Any]:
    kcc = source["kv_cache_config"]
    n = kcc.num_blocks
    kv_caches = source.get("kv_caches")
    groups = list(kcc.kv_cache_groups)

    storages: dict[tuple[str, int], dict[str, Any]] = {}

    def storage_id(tensor: Any) -> str:
        key = (str(tensor.device), int(tensor.untyped_storage()._cdata))
        if key not in storages:
            st = tensor.untyped_storage()
            storages[key] = {
                "storage_id": f"s{len(storages)}",
                "device": str(tensor.device),
                "pointer": int(st.data_ptr()),
                "size_bytes": int(st.nbytes()),
            }
        return storages[key]["storage_id"]

    layer_views: dict[str, list[dict[str, Any]]] = {}
    if kv_caches is None:
        for path in ("cache.storages", "cache.allocated_cache_bytes", "cache.layer_views"):
            unresolved.append(path)
    else:
        for g in groups:
            for name in g.layer_names:
                views = []
                for t in _tensors_of(kv_caches.get(name)):
                    esize = int(t.element_size())
                    axis = _block_axis(t, n)
                    views.append(
                        {
                            "storage_id": storage_id(t),
                            "storage_offset_bytes": int(t.storage_offset()) * esize,
                            "dtype": str(t.dtype),
                            "shape": [int(x) for x in t.shape],
                            "stride_bytes": [int(s) * esize for s in t.stride()],
                            "element_size_bytes": esize,
                            "block_axis": axis,
                            "kernel_block_size_tokens": g.kv_cache_spec.block_size // (int(t.shape[axis]) // n),
                        }
                    )
                if views:
                    layer_views[name] = views
                else:
                    unresolved.value(f"cache.layer_views.{name}", None)

    allocations: list[dict[str, Any]] = []
    for k, tensor in enumerate(kcc.kv_cache_tensors):
        layers = list(tensor.shared_by)
        size = int(tensor.size)
        slot = size // n if n else 0
        planned = int(getattr(tensor, "block_stride", 0) or 0)
        first = _tensors_of(kv_caches.get(layers[0])) if kv_caches is not None else []
        views = [v for name in layers for v in layer_views.get(name, [])]
        if planned > 0:  # vLLM's packed plan: the block stride is planned
            block_stride = planned
        elif views:  # a separate tensor: the backend's views say whether each block is one contiguous slot
            packed = all(v["block_axis"] == 0 and v["stride_bytes"][0] == slot for v in views)
            block_stride = slot if packed else 0
        else:  # a separate tensor, no views yet: whole, as vLLM plans it (block_stride 0 = not packed)
            block_stride = 0
        allocations.append(
            {
                "storage_id": unresolved.value(f"cache.allocations[{k}].storage_id", storage_id(first[0]) if first else None),
                "size": size,
                "layers": layers,
                "layer_stride": None,
                "block_stride": block_stride,
                "offset": int(getattr(tensor, "offset", 0) or 0),
            }
        )
    records = list(storages.values())
    return {
        "num_blocks": n,
        "available_cache_bytes": unresolved.value("cache.available_cache_bytes", source.get("available_cache_bytes")),
        "allocated_cache_bytes": sum(s["size_bytes"] for s in records) if kv_caches is not None else None,
        "kv_cache_layout": None,
        "storages": records,
        "allocations": allocations,
        "groups": [_group(gid, g, worker=True) for gid, g in enumerate(groups)],
        "layer_views": layer_views,
        "attention_groups": None,
        "model_runner": None,
        "placement": "shared_pool",
    }


def _scheduler_cache(source: Mapping[str, Any]) -> dict[str, Any]:
    kcc = source["kv_cache_config"]
    sched = source["scheduler"]
    manager = sched.kv_cache_manager
    pool = manager.block_pool
    null_id = pool.null_block.block_id
    return {
        "num_blocks": kcc.num_blocks,
        "free_blocks": pool.get_num_free_blocks(),
        "null_block_id": null_id,
        "reserved_block_ids": sorted({null_id} | {b.block_id for b in pool.blocks if b.ref_cnt > 0}),
        "watermark_blocks": int(getattr(manager, "watermark_blocks", 0)),
        "pool_count": 1,
        "block_size": sched.block_size,
        "hash_block_size": None,
        "cache_hit_alignment_tokens": None,
        "mamba_cache_mode": None,
        "groups": [_group(gid, g, worker=False) for gid, g in enumerate(kcc.kv_cache_groups)],
        "startup": None,
    }


def _hardware(source: Mapping[str, Any], unresolved: _Unresolved) -> dict[str, Any]:
    given = source.get("hardware")
    if given is None:
        given = {}
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            given = {"sm": props.major * 10 + props.minor, "device_name": props.name, "total_memory_bytes": int(props.total_memory)}
    return {k: unresolved.value(f"hardware.{k}", given.get(k)) for k in ("gpu", "sm", "device_name", "total_memory_bytes")}


def build_record(source: Mapping[str, Any], *, phase: str, rank: int) -> dict[str, Any]:
    """One record of the vLLM 0.27.0 shape (02 §3.14) from live vLLM objects."""
    import vllm

    version = vllm.__version__
    if version != FRAMEWORK_VERSION:
        raise RuntimeError(f"the vllm_027 observer needs vLLM {FRAMEWORK_VERSION}; this process runs vLLM {version}")
    kind = source.get("kind", "worker")
    manifest = source["launch"]
    vc = source["vllm_config"]
    dp = int(source.get("dp_rank", 0))
    unresolved = _Unresolved()
    flags = dict(source.get("lifecycle") or {})
    model = dict(source.get("model") or {})
    if not model:
        mc = vc.model_config
        hf = getattr(mc, "hf_config", None)
        commit = vars(hf).get("_commit_hash") if hf is not None else None
        model = {
            "path": mc.model,
            "revision": mc.revision,
            "config_sha256": _sha256_file(os.path.join(str(mc.model), "config.json")),
            "loaded_config_commit": commit if isinstance(commit, str) and len(commit) == 40 else None,
        }
    record: dict[str, Any] = {
        "schema_version": SCHEMA,
        "binding": {
            "configuration": manifest["configuration"],
            "phase": phase,
            "attempt_id": manifest["attempt_id"],
            "kind": kind,
            "rank": {"dp": dp, "tp": rank, "pp": 0} if kind == "worker" else {"dp": dp, "tp": None, "pp": None},
        },
        "runtime": _runtime(source, version, unresolved),
        "observer": _observer(),
        "launch": manifest["launch"],
        "model": {k: (unresolved.value(f"model.{k}", model.get(k)) if k != "loaded_config_commit" else model.get(k))
                  for k in ("path", "revision", "config_sha256", "loaded_config_commit")},
        "settings": _settings(vc),
    }  # fmt: skip
    if kind == "worker":
        record["lifecycle"] = {
            "measurement": flags.get("measurement", "after_warmup"),
            "cache_initialized": bool(flags.get("cache_initialized", source.get("kv_caches") is not None)),
            "warmup_completed": bool(flags.get("warmup_completed", False)),
            "capture_completed": bool(flags.get("capture_completed", False)),
        }
        record["hardware"] = _hardware(source, unresolved)
        record["cache"] = _worker_cache(source, unresolved)
    else:
        record["lifecycle"] = {"measurement": "scheduler_initialized", "cache_initialized": bool(flags.get("cache_initialized", True))}
        record["cache"] = _scheduler_cache(source)
    record["unresolved_fields"] = sorted(unresolved)
    record["error"] = source.get("error")
    return record

"""The building blocks of a vLLM observer (02 §3), the same for every release.

A runtime plugin's observer turns the live objects of one vLLM process into
one ``fpmcore-runtime-observation/v1`` record: the classes of
:mod:`fpmcore.documents.record`, written with :func:`fpmcore.documents.record.record_to_json`.
:func:`build_record` assembles it for a :class:`Release` (the exact version,
the class table, whether it writes hybrid evidence, the worker cache its
tensors give); everything else is here:

* :class:`Unresolved`: the key paths the observer could not read (02 §3.12);
* the identity blocks: :func:`runtime_identity` (an unreadable source file is
  ``null`` and unresolved), :func:`observer_identity`,
  :func:`model_identity`, :func:`hardware`, the binding and the lifecycle;
* the resolved settings (:func:`settings`, 02 §3.4) and the prefix-caching
  evidence (:func:`prefix_caching`, 02 §3.5);
* the cache groups of a worker and of the scheduler (:func:`worker_group`,
  :func:`scheduler_group`, 02 §3.7, §3.11), the scheduler's ``cache``
  (:func:`scheduler_cache`) and the storage numbering of the worker's
  tensors (:class:`Storages`).

A record *without hybrid evidence* (02 §3.14: a release whose plugin does not
import hybrid evidence) has no ``prefix_caching``, no ``state``,
``layer_specs`` or ``spec_fields``, ``null`` in the keys 02 §3.4 marks ⁰, no
startup reservation and no scheduler ``startup``.

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
    worker only, optional: layer name → the tensor (or tuple of tensors)
    bound to the layer.  Absent or ``None`` when the tensors are not
    allocated: the record then lists the tensor evidence as unresolved.
``model_runner``
    worker only, optional: the model runner (``attn_groups``,
    ``_kernel_block_sizes``), where the release reads it.
``scheduler``
    scheduler only: the live ``Scheduler`` (block sizes, block pool).
``available_cache_bytes``
    worker only, optional: the memory the profiler handed to cache planning.
``hardware``
    worker only, optional: ``{gpu, sm, device_name, total_memory_bytes}``;
    without it the observer asks torch for the CUDA device of the process.
``lifecycle``
    optional ``{measurement, cache_initialized, warmup_completed,
    capture_completed}`` set at the moment of observation (a worker's
    ``measurement`` defaults to ``after_warmup``).
``model``
    optional ``{path, revision, config_sha256, loaded_config_commit}``;
    without it the observer reads the loaded model configuration (02 §3.3).
``image``, ``source_revision``
    optional: the container image and the vLLM commit the runner knows.
``error``
    optional: what went wrong, copied into the record.

vLLM and torch are imported inside the functions only.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from fpmcore.plugin_api import (
    OMITTED,
    RECORD_SCHEMA_VERSION,
    Allocation,
    AttentionGroup,
    Binding,
    GroupState,
    Hardware,
    LayerSpec,
    LayerView,
    ModelIdentity,
    ModelRunner,
    ObserverIdentity,
    Rank,
    RuntimeIdentity,
    SchedulerCache,
    SchedulerGroup,
    SchedulerLifecycle,
    SchedulerRecord,
    SpecClassification,
    Startup,
    Storage,
    WorkerCache,
    WorkerGroup,
    WorkerLifecycle,
    WorkerRecord,
    record_to_json,
)
from fpmcore_vllm_support.encode import cdiv, class_name, encode_value, spec_fields

#: The modules of this library an observer's record is built with; their bytes
#: are part of every observer's ``source_sha256`` (:func:`observer_identity`).
SHARED_MODULES = ("fpmcore_vllm_support.encode", "fpmcore_vllm_support.observe")

#: The installed vLLM files whose objects every observer of a release with hybrid
#: evidence (0.32.0, 0.33.0) reads: the configurations, the KV cache interface,
#: the scheduler, its manager and pool, the planning utilities and the worker's
#: allocation (02 §3.3); a release adds its own (:func:`source_files`).
HYBRID_SOURCE_FILES = (
    "vllm/config/cache.py",
    "vllm/config/compilation.py",
    "vllm/config/model.py",
    "vllm/config/parallel.py",
    "vllm/config/scheduler.py",
    "vllm/config/vllm.py",
    "vllm/v1/core/block_pool.py",
    "vllm/v1/core/kv_cache_manager.py",
    "vllm/v1/core/kv_cache_utils.py",
    "vllm/v1/core/sched/scheduler.py",
    "vllm/v1/kv_cache_interface.py",
    "vllm/v1/worker/utils.py",
)


def source_files(*own: str) -> tuple[str, ...]:
    """:data:`HYBRID_SOURCE_FILES` and a release's ``own`` files, in path order (``runtime.source_files``)."""
    return tuple(sorted({*HYBRID_SOURCE_FILES, *own}))


class Unresolved:
    """Collects the key paths the observer could not read (02 §3.12), each once."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def add(self, path: str) -> None:
        if path not in self.paths:
            self.paths.append(path)

    def value(self, path: str, value: Any) -> Any:
        """``value``, with ``path`` recorded as unresolved when it is ``None``."""
        if value is None:
            self.add(path)
        return value


@attrs.frozen
class Release:
    """What one vLLM release's observer adds to the shared building blocks.

    ``version``        the exact vLLM version the observer reads (``"0.33.0"``);
    ``distribution``   the runtime plugin's distribution (``observer.plugin``);
    ``observer``       the plugin's observer module, hashed into ``source_sha256``;
    ``source_files``   the installed vLLM files the observer reads objects from (02 §3.3);
    ``hybrid``         the release's records carry hybrid evidence (02 §3.14);
    ``classify``       the class table a worker group's ``kind`` comes from (02 §5);
    ``worker_cache``   ``worker_cache(source, unresolved, release)``: the worker's
                       ``cache`` object, whose tensor layout is the release's;
    ``absent_hardware`` the ``hardware`` keys the release's platform does not have
                       (``ImportRules.absent_hardware``): ``null`` there is not unresolved.
    """

    version: str
    distribution: str
    observer: str
    source_files: tuple[str, ...]
    hybrid: bool
    classify: Callable[[str], SpecClassification]
    worker_cache: Callable[[Mapping[str, Any], Unresolved, Release], WorkerCache]
    absent_hardware: frozenset[str] = frozenset()


# --------------------------------------------------------------------------
# identity
# --------------------------------------------------------------------------


def sha256_file(path: str) -> str | None:
    """The SHA-256 of a file's bytes, ``None`` when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def _module_file(name: str) -> str | None:
    module = sys.modules.get(name)
    if module is None:
        import importlib

        module = importlib.import_module(name)
    return getattr(module, "__file__", None)


def observer_identity(distribution: str, modules: Sequence[str]) -> ObserverIdentity:
    """``observer`` (02 §3.3): the plugin's distribution and version, and the SHA-256 of the observer's code.

    The code is the bytes of ``modules`` (the plugin's observer module, then
    :data:`SHARED_MODULES`) one after the other, as installed: a change to
    any of them changes ``source_sha256``.  ``None`` when one cannot be read.
    """
    from importlib import metadata

    try:
        version: str | None = metadata.version(distribution)
    except metadata.PackageNotFoundError:  # pragma: no cover - not installed
        version = None
    digest = hashlib.sha256()
    for name in modules:
        path = _module_file(name)
        try:
            with open(str(path), "rb") as fh:
                digest.update(fh.read())
        except OSError:
            return ObserverIdentity(plugin=distribution, version=version, source_sha256=None)
    return ObserverIdentity(plugin=distribution, version=version, source_sha256=digest.hexdigest())


def runtime_identity(source: Mapping[str, Any], files: Iterable[str], unresolved: Unresolved) -> RuntimeIdentity:
    """``runtime`` (02 §3.3): vLLM's own version string (never normalized) and the hashes of ``files``.

    A file that cannot be read is ``null`` and listed in ``unresolved_fields``.
    The revision is the runner's, else the commit vLLM was built from.
    """
    import vllm

    root = os.path.dirname(os.path.dirname(os.path.abspath(vllm.__file__)))
    hashes: dict[str, str | None] = {}
    for rel in files:
        hashes[rel] = unresolved.value(f"runtime.source_files.{rel}", sha256_file(os.path.join(root, rel)))
    revision = source.get("source_revision")
    if revision is None:
        commit = getattr(vllm, "__commit_id__", None) or ""
        commit = commit[1:] if commit.startswith("g") else commit
        if len(commit) in (40, 64) and all(c in "0123456789abcdef" for c in commit):
            revision = commit
    return RuntimeIdentity(
        framework="vllm",
        version=vllm.__version__,
        source_revision=unresolved.value("runtime.source_revision", revision),
        source_files=hashes,
        image=unresolved.value("runtime.image", source.get("image")),
    )


def model_identity(source: Mapping[str, Any], vllm_config: Any, unresolved: Unresolved) -> ModelIdentity:
    """``model`` (02 §3.3), given by the runner or read from the loaded model configuration.

    The commit is read from the configuration's instance dictionary only.
    """
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
            "config_sha256": sha256_file(config_path) if os.path.isdir(str(mc.model)) else None,
            "loaded_config_commit": commit,
        }
    for key in ("path", "revision", "config_sha256"):
        unresolved.value(f"model.{key}", out[key])
    return ModelIdentity(**out)


def hardware(source: Mapping[str, Any], unresolved: Unresolved, absent: frozenset[str] = frozenset()) -> Hardware:
    """``hardware`` (02 §3.1): given by the runner, or read from the CUDA device of the process.

    A key in ``absent`` (one the platform does not have, ``sm`` on a CPU) is
    ``null`` without being unresolved when the runner gives ``None`` for it.
    """
    given = source.get("hardware")
    if given is None:
        given = {}
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            given = {"sm": props.major * 10 + props.minor, "device_name": props.name,
                     "total_memory_bytes": int(props.total_memory)}  # fmt: skip
    return Hardware(**{
        k: given.get(k) if k in absent and k in given and given[k] is None else unresolved.value(f"hardware.{k}", given.get(k))
        for k in ("gpu", "sm", "device_name", "total_memory_bytes")
    })  # fmt: skip


def binding(manifest: Mapping[str, Any], *, phase: str, kind: str, dp: int, rank: int) -> Binding:
    """``binding`` (02 §3.1): the manifest's configuration and attempt; a scheduler has no TP or PP rank."""
    worker = kind == "worker"
    return Binding(
        configuration=manifest["configuration"],
        phase=phase,
        attempt_id=manifest["attempt_id"],
        kind=kind,
        rank=Rank(dp=dp, tp=rank if worker else None, pp=0 if worker else None),
    )


def worker_lifecycle(source: Mapping[str, Any]) -> WorkerLifecycle:
    """A worker's ``lifecycle`` (02 §3.6): the runner's flags; the cache counts as initialized with tensors."""
    flags = source.get("lifecycle") or {}
    return WorkerLifecycle(
        measurement=flags.get("measurement", "after_warmup"),
        cache_initialized=bool(flags.get("cache_initialized", source.get("kv_caches") is not None)),
        warmup_completed=bool(flags.get("warmup_completed", False)),
        capture_completed=bool(flags.get("capture_completed", False)),
    )


def scheduler_lifecycle(source: Mapping[str, Any]) -> SchedulerLifecycle:
    """A scheduler's ``lifecycle`` (02 §3.11): read right after initialization."""
    flags = source.get("lifecycle") or {}
    return SchedulerLifecycle(measurement="scheduler_initialized",
                              cache_initialized=bool(flags.get("cache_initialized", True)))  # fmt: skip


# --------------------------------------------------------------------------
# settings (02 §3.4) and prefix caching (02 §3.5)
# --------------------------------------------------------------------------


def settings(vllm_config: Any, kv_cache_config: Any, unresolved: Unresolved, *, hybrid: bool) -> dict[str, Any]:
    """The resolved vLLM settings of the process (02 §3.4).

    Without hybrid evidence the keys 02 §3.4 marks ⁰ are ``null`` (02 §3.14),
    as are the model runner and the in-flight tokens.
    """
    vc = vllm_config
    mc, cc, sc, pc, comp = (vc.model_config, vc.cache_config, vc.scheduler_config, vc.parallel_config,
                            vc.compilation_config)  # fmt: skip
    uva = getattr(getattr(vc, "offload_config", None), "uva", None)

    def hybrid_only(read: Callable[[], Any]) -> Any:
        return read() if hybrid else None

    def layout() -> Any:
        value = getattr(cc, "kv_cache_layout", None)
        return unresolved.value("settings.cache.kv_cache_layout", None if value is None else encode_value(value))

    return {
        "model": {"max_model_len": mc.max_model_len, "dtype": encode_value(mc.dtype)},
        "cache": {
            "block_size": cc.block_size,
            "gpu_memory_utilization": cc.gpu_memory_utilization,
            "enable_prefix_caching": bool(cc.enable_prefix_caching),
            "mamba_cache_mode": hybrid_only(lambda: encode_value(cc.mamba_cache_mode)),
            "mamba_block_size": hybrid_only(lambda: cc.mamba_block_size),
            "prefix_match_unit": hybrid_only(lambda: cc.prefix_match_unit),
            "hash_block_size": hybrid_only(lambda: unresolved.value(
                "settings.cache.hash_block_size", getattr(kv_cache_config, "hash_block_size", None))),
            "kv_cache_dtype": encode_value(cc.cache_dtype),
            "kv_cache_layout": hybrid_only(layout),
            "num_gpu_blocks_override": cc.num_gpu_blocks_override,
            "kv_cache_memory_bytes": getattr(cc, "kv_cache_memory_bytes", None),
            "cpu_offload_gb": getattr(uva, "cpu_offload_gb", getattr(cc, "cpu_offload_gb", None)),
            "prefix_cache_retention_interval": hybrid_only(lambda: cc.prefix_cache_retention_interval),
        },
        "scheduler": {
            "max_num_batched_tokens": sc.max_num_batched_tokens,
            "max_num_seqs": sc.max_num_seqs,
            "async_scheduling": bool(sc.async_scheduling),
            "enable_chunked_prefill": bool(sc.enable_chunked_prefill),
            "max_in_flight_tokens": hybrid_only(lambda: vc.max_in_flight_tokens),
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
        "model_runner": hybrid_only(lambda: "v2" if getattr(vc, "use_v2_model_runner", False) else "v1"),
        "speculative": encode_value(vc.speculative_config),
        "kv_transfer": encode_value(vc.kv_transfer_config),
    }


def prefix_caching(vllm_config: Any, hash_block_size: Any, unresolved: Unresolved) -> dict[str, Any]:
    """``prefix_caching`` (02 §3.5): the switch, the Mamba mode and the hash block size."""
    cc = vllm_config.cache_config
    return {
        "enable_prefix_caching": bool(cc.enable_prefix_caching),
        "mamba_cache_mode": encode_value(cc.mamba_cache_mode),
        "hash_block_size": unresolved.value("prefix_caching.hash_block_size", hash_block_size),
    }


# --------------------------------------------------------------------------
# cache groups (02 §3.7, §3.11)
# --------------------------------------------------------------------------


def layer_spec(group: Any, layer: str) -> Any:
    """The spec of one layer of a group: its own spec inside a ``UniformTypeKVCacheSpecs`` group, else the group's."""
    from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs

    spec = group.kv_cache_spec
    return spec.kv_cache_specs[layer] if isinstance(spec, UniformTypeKVCacheSpecs) else spec


def group_kind(group: Any, classify: Callable[[str], SpecClassification]) -> str:
    """The kind of a group by the release's class table (I-43): a composite group takes its first layer's."""
    top = classify(class_name(group.kv_cache_spec))
    if not top.composite:
        return top.kind
    kinds = [classify(class_name(layer_spec(group, name))).kind for name in group.layer_names]
    return kinds[0] if kinds else top.kind


def startup_blocks(spec: Any, vllm_config: Any, path: str, unresolved: Unresolved) -> int | None:
    """03 C-1: ``cdiv(spec.max_memory_usage_bytes(vllm_config), spec.page_size_bytes)``; unresolved if vLLM cannot say."""
    try:
        return cdiv(int(spec.max_memory_usage_bytes(vllm_config)), int(spec.page_size_bytes))
    except (NotImplementedError, AttributeError, TypeError, ZeroDivisionError):
        unresolved.add(path)
        return None


def state(spec: Any) -> GroupState | None:
    """02 §3.7.1: the steady count and the checkpoint fields of a state group's spec (``None``: not a state spec)."""
    from vllm.v1 import kv_cache_interface as kvi

    if isinstance(spec, kvi.MambaSpec):
        return GroupState(
            blocks_per_request=1 + spec.num_speculative_blocks,
            num_speculative_blocks=spec.num_speculative_blocks,
            num_prefill_checkpoint_blocks=spec.num_prefill_checkpoint_blocks,
            prefill_checkpoint_alignment=spec.prefill_checkpoint_alignment,
            mamba_cache_mode=encode_value(spec.mamba_cache_mode),
        )
    ring = getattr(kvi, "CircularBufferSpec", None)
    if ring is not None and isinstance(spec, ring):
        return GroupState(blocks_per_request=1)
    return None


def _geometry(gid: int, group: Any, spec: Any, vllm_config: Any, unresolved: Unresolved, hybrid: bool) -> dict:
    """The keys a worker group and its scheduler copy share, after the class (02 §3.7, §3.11)."""
    from vllm.v1.kv_cache_interface import get_kv_cache_spec_sliding_window

    role = getattr(group, "role", "default")
    path = f"cache.groups[{gid}].startup_blocks_per_request"
    return {
        "block_size_tokens": spec.block_size,
        "page_size_bytes": spec.page_size_bytes,
        "sliding_window": get_kv_cache_spec_sliding_window(spec),
        "prefix_cacheable": bool(getattr(spec, "prefix_cacheable", True)),
        "host_resident": bool(getattr(group, "host_resident", False)),
        "role": encode_value(getattr(role, "value", role)),
        "startup_blocks_per_request": startup_blocks(spec, vllm_config, path, unresolved) if hybrid else None,
    }


def worker_group(gid: int, group: Any, vllm_config: Any, unresolved: Unresolved, release: Release) -> WorkerGroup:
    """One worker group (02 §3.7); with hybrid evidence its ``state`` and per-layer specs too."""
    spec = group.kv_cache_spec
    kind = group_kind(group, release.classify)
    extra: dict[str, Any] = {}
    if release.hybrid:
        found = state(layer_spec(group, group.layer_names[0])) if kind == "state" else None
        extra["state"] = OMITTED if found is None else found
        extra["layer_specs"] = {
            name: LayerSpec(spec_class=class_name(layer), block_size=layer.block_size,
                            page_size_bytes=layer.page_size_bytes, fields=spec_fields(layer))
            for name in group.layer_names
            for layer in (layer_spec(group, name),)
        }  # fmt: skip
    return WorkerGroup(
        group_id=gid,
        spec_class=class_name(spec),
        kind=kind,
        layer_names=list(group.layer_names),
        **_geometry(gid, group, spec, vllm_config, unresolved, release.hybrid),
        **extra,
    )


def scheduler_group(gid: int, group: Any, vllm_config: Any, unresolved: Unresolved, *, hybrid: bool) -> SchedulerGroup:
    """One scheduler group copy (02 §3.11): the engine core's spec (a uniform group's first layer's)."""
    spec = group.kv_cache_spec
    return SchedulerGroup(
        group_id=gid,
        layer_names=list(group.layer_names),
        spec_class=class_name(spec),
        **_geometry(gid, group, spec, vllm_config, unresolved, hybrid),
        spec_fields=spec_fields(spec) if hybrid else OMITTED,
    )


def scheduler_cache(source: Mapping[str, Any], unresolved: Unresolved, *, hybrid: bool) -> SchedulerCache:
    """The scheduler's ``cache`` (02 §3.11), read right after initialization."""
    vc = source["vllm_config"]
    kcc = source["kv_cache_config"]
    sched = source["scheduler"]
    manager = sched.kv_cache_manager
    pool = manager.block_pool
    null_id = pool.null_block.block_id
    cc = vc.cache_config
    startup = None
    if hybrid:
        startup = Startup(
            max_model_len=vc.model_config.max_model_len,
            max_in_flight_tokens=vc.max_in_flight_tokens,
            kv_cache_max_concurrency=unresolved.value("cache.startup.kv_cache_max_concurrency",
                                                      cc.kv_cache_max_concurrency),
            kv_cache_size_tokens=unresolved.value("cache.startup.kv_cache_size_tokens", cc.kv_cache_size_tokens),
        )  # fmt: skip
    return SchedulerCache(
        num_blocks=kcc.num_blocks,
        free_blocks=pool.get_num_free_blocks(),
        null_block_id=null_id,
        reserved_block_ids=sorted({null_id} | {b.block_id for b in pool.blocks if b.ref_cnt > 0}),
        watermark_blocks=int(getattr(manager, "watermark_blocks", 0)),
        pool_count=1 + (1 if getattr(kcc, "hisparse_host_num_blocks", None) else 0),
        block_size=sched.block_size,
        hash_block_size=sched.hash_block_size if hybrid else None,
        cache_hit_alignment_tokens=unresolved.value(
            "cache.cache_hit_alignment_tokens", getattr(kcc, "cache_hit_alignment_tokens", None)) if hybrid else None,
        mamba_cache_mode=encode_value(cc.mamba_cache_mode) if hybrid else None,
        groups=[scheduler_group(gid, g, vc, unresolved, hybrid=hybrid) for gid, g in enumerate(kcc.kv_cache_groups)],
        startup=startup,
    )  # fmt: skip


# --------------------------------------------------------------------------
# worker tensors (02 §3.8, §3.9)
# --------------------------------------------------------------------------


def tensors_of(value: Any) -> list[Any]:
    """The tensors bound to a layer: one tensor, or every tensor of a (nested) tuple or list."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_of(v)]
    return [value]


class Storages:
    """Distinct backing allocations of the worker's tensors, numbered ``s0``, ``s1``, … in first-use order."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, int], str] = {}
        self.records: list[Storage] = []

    def id_of(self, tensor: Any) -> str:
        storage = tensor.untyped_storage()
        key = (str(tensor.device), int(storage._cdata))
        if key not in self.ids:
            sid = f"s{len(self.records)}"
            self.ids[key] = sid
            self.records.append(Storage(storage_id=sid, device=str(tensor.device),
                                        pointer=int(storage.data_ptr()), size_bytes=int(storage.nbytes())))  # fmt: skip
        return self.ids[key]

    def allocated_bytes(self) -> int:
        """``cache.allocated_cache_bytes``: the bytes of every distinct storage."""
        return sum(s.size_bytes for s in self.records)


def worker_cache(
    source: Mapping[str, Any],
    unresolved: Unresolved,
    release: Release,
    *,
    storages: Storages,
    allocations: list[Allocation],
    layer_views: dict[str, list[LayerView]],
    kv_cache_layout: str | None = None,
    attention_groups: list[AttentionGroup] | None = None,
    model_runner: ModelRunner | None = None,
    placement: str = "shared_pool",
) -> WorkerCache:
    """A worker's ``cache`` (02 §3.6) from the release's reading of its tensors.

    The release gives what its tensor layout says (storages, allocations,
    views, layout, attention groups, model runner, placement); the block
    count, the allowance the profiler handed over, the allocated bytes (those
    of the storages, ``null`` without tensors) and the groups are read here.
    """
    vc, kcc = source["vllm_config"], source["kv_cache_config"]
    return WorkerCache(
        num_blocks=kcc.num_blocks,
        available_cache_bytes=unresolved.value("cache.available_cache_bytes", source.get("available_cache_bytes")),
        allocated_cache_bytes=storages.allocated_bytes() if source.get("kv_caches") is not None else None,
        kv_cache_layout=kv_cache_layout,
        storages=storages.records,
        allocations=allocations,
        groups=[worker_group(gid, g, vc, unresolved, release) for gid, g in enumerate(kcc.kv_cache_groups)],
        layer_views=layer_views,
        attention_groups=attention_groups,
        model_runner=model_runner,
        placement=placement,
    )


def _attention_groups(model_runner: Any) -> list[Any]:
    groups = getattr(model_runner, "attn_groups", None) or []
    return [g for per_group in groups for g in (per_group if isinstance(per_group, (list, tuple)) else [per_group])]


def kernel_block_sizes(model_runner: Any) -> list[int]:
    """The model runner's kernel block size per cache group (02 §3.10).

    ``GPUModelRunner._kernel_block_sizes`` in vLLM 0.32.0 and 0.33.0
    (vllm/v1/worker/gpu_model_runner.py: 0.32.0 7093, 0.33.0 7028): neither
    release has a public ``kernel_block_sizes``.  Empty when the runner has none.
    """
    return [int(k) for k in getattr(model_runner, "_kernel_block_sizes", None) or []]


def layer_strided_worker_cache(
    source: Mapping[str, Any], unresolved: Unresolved, release: Release
) -> WorkerCache:
    """The worker ``cache`` (02 §3.6) of a release whose ``KVCacheTensor`` has layer strides (vLLM 0.32.0, 0.33.0).

    The planned ``KVCacheTensor(size, layers, layer_stride, block_stride,
    offset)`` of the worker's ``KVCacheConfig`` are the allocations; the
    model runner's attention groups (``attn_groups``) and kernel block sizes
    (:func:`kernel_block_sizes`); one view per tensor bound to a layer, whose
    outermost axis walks the blocks; the storages behind the views, each
    counted once however many groups and layers alias it (:class:`Storages`).
    Without ``kv_caches`` (a dry run) the tensor evidence is unresolved.
    """
    vc = source["vllm_config"]
    kcc = source["kv_cache_config"]
    kv_caches = source.get("kv_caches")
    runner = source.get("model_runner")
    groups = list(kcc.kv_cache_groups)

    placement = "shared_pool"
    if any(g.host_resident or getattr(g.role, "value", g.role) != "default" for g in groups):
        placement = "hisparse"
        unresolved.add("cache.groups")

    storages = Storages()
    layer_views: dict[str, list[LayerView]] = {}
    attention_groups: list[AttentionGroup] | None = None
    model_runner: ModelRunner | None = None
    kernels = kernel_block_sizes(runner) if runner is not None else []

    ag_of: dict[str, Any] = {}
    if runner is not None:
        attention_groups = []
        for ag in _attention_groups(runner):
            attention_groups.append(AttentionGroup(
                kv_cache_group_id=ag.kv_cache_group_id, backend=ag.backend.get_name(),
                layer_names=list(ag.layer_names), kernel_block_size=ag.kernel_block_size,
                kernel_block_stride=int(ag.kernel_block_stride),
            ))  # fmt: skip
            for name in ag.layer_names:
                ag_of[name] = ag
        model_runner = ModelRunner(
            runner_class=class_name(runner),
            version="v2" if getattr(vc, "use_v2_model_runner", False) else "v1",
            kernel_block_sizes=unresolved.value("cache.model_runner.kernel_block_sizes", kernels or None),
        )
    else:
        unresolved.add("cache.attention_groups")
        unresolved.add("cache.model_runner")

    if kv_caches is None:
        for path in ("cache.storages", "cache.allocated_cache_bytes", "cache.layer_views"):
            unresolved.add(path)
    else:
        n = kcc.num_blocks
        for gid, group in enumerate(groups):
            block = group.kv_cache_spec.block_size
            for name in group.layer_names:
                tensors = tensors_of(kv_caches.get(name))
                if not tensors:
                    unresolved.add(f"cache.layer_views.{name}")
                    continue
                ag = ag_of.get(name)
                stride = int(ag.kernel_block_stride) if ag is not None else 0
                if ag is not None and ag.kernel_block_size is not None:
                    kernel = int(ag.kernel_block_size)
                elif gid < len(kernels):
                    kernel = kernels[gid]
                elif int(tensors[0].shape[0]) % n == 0 and block % (int(tensors[0].shape[0]) // n) == 0:
                    # no runner: the view holds n * r kernel blocks of B // r tokens
                    kernel = block // (int(tensors[0].shape[0]) // n)
                else:
                    unresolved.add(f"cache.layer_views.{name}")
                    continue
                layer_views[name] = [
                    LayerView(storage_id=storages.id_of(t), **view_layout(t), block_axis=0,
                              kernel_block_size_tokens=kernel, kernel_block_stride=stride)
                    for t in tensors
                ]  # fmt: skip

    allocations = []
    for k, tensor in enumerate(kcc.kv_cache_tensors):
        views = tensors_of(kv_caches.get(tensor.layers[0])) if kv_caches is not None else []
        allocations.append(Allocation(
            storage_id=unresolved.value(f"cache.allocations[{k}].storage_id", storages.id_of(views[0]) if views else None),
            size=tensor.size, layers=list(tensor.layers), layer_stride=tensor.layer_stride,
            block_stride=tensor.block_stride, offset=tensor.offset,
        ))  # fmt: skip

    layout = getattr(kcc, "kv_cache_layout", None) or getattr(vc.cache_config, "kv_cache_layout", None)
    return worker_cache(
        source, unresolved, release, storages=storages, allocations=allocations, layer_views=layer_views,
        kv_cache_layout=unresolved.value("cache.kv_cache_layout", encode_value(layout)),
        attention_groups=attention_groups, model_runner=model_runner, placement=placement,
    )  # fmt: skip


def view_layout(tensor: Any) -> dict[str, Any]:
    """The layout keys of a view record (02 §3.9): offset, dtype, shape and strides in bytes, element size."""
    esize = int(tensor.element_size())
    return {
        "storage_offset_bytes": int(tensor.storage_offset()) * esize,
        "dtype": str(tensor.dtype),
        "shape": [int(x) for x in tensor.shape],
        "stride_bytes": [int(s) * esize for s in tensor.stride()],
        "element_size_bytes": esize,
    }


# --------------------------------------------------------------------------
# the record
# --------------------------------------------------------------------------


def check_version(release: Release, version: str) -> None:
    """An observer writes records only for the exact vLLM version it reads (02 §3.12)."""
    if version != release.version:
        raise RuntimeError(
            f"the {release.distribution} observer needs vLLM {release.version}; this process runs vLLM {version}"
        )


def build_record(source: Mapping[str, Any], *, phase: str, rank: int, release: Release) -> dict[str, Any]:
    """One ``fpmcore-runtime-observation/v1`` record from the live objects of ``source`` (02 §3), as JSON."""
    import vllm

    check_version(release, vllm.__version__)
    kind = source.get("kind", "worker")
    if kind not in ("worker", "scheduler"):
        raise ValueError(f"source kind must be 'worker' or 'scheduler'; got {kind!r}")
    manifest = source["launch"]
    vc = source["vllm_config"]
    unresolved = Unresolved()
    common: dict[str, Any] = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "binding": binding(manifest, phase=phase, kind=kind, dp=int(source.get("dp_rank", 0)), rank=rank),
        "runtime": runtime_identity(source, release.source_files, unresolved),
        "observer": observer_identity(release.distribution, (release.observer, *SHARED_MODULES)),
        "launch": manifest["launch"],
        "model": model_identity(source, vc, unresolved),
        "settings": settings(vc, source["kv_cache_config"], unresolved, hybrid=release.hybrid),
    }
    if kind == "worker":
        hash_block = getattr(source["kv_cache_config"], "hash_block_size", None)
        record: WorkerRecord | SchedulerRecord = WorkerRecord(
            **common,
            prefix_caching=prefix_caching(vc, hash_block, unresolved) if release.hybrid else OMITTED,
            lifecycle=worker_lifecycle(source),
            hardware=hardware(source, unresolved, release.absent_hardware),
            cache=release.worker_cache(source, unresolved, release),
            unresolved_fields=[],
            error=source.get("error"),
        )
    else:
        record = SchedulerRecord(
            **common,
            prefix_caching=prefix_caching(vc, source["scheduler"].hash_block_size, unresolved) if release.hybrid else OMITTED,
            lifecycle=scheduler_lifecycle(source),
            cache=scheduler_cache(source, unresolved, hybrid=release.hybrid),
            unresolved_fields=[],
            error=source.get("error"),
        )
    return record_to_json(attrs.evolve(record, unresolved_fields=sorted(unresolved.paths)))

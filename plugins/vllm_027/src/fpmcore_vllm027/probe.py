"""Dry probe on CPU: vLLM 0.27.0's real cache planning for a MODEL.json.

``fpm probe --dry-run MODEL.json -o DIR`` reaches :func:`dry_probe` through
the ``fpm_dry_probe`` hook when the installed runtime is ``vllm==0.27.0``.
It runs the engine core's cache planning of vLLM 0.27.0
(``EngineCore._initialize_kv_caches`` in vllm/v1/engine/core.py:
``register_all_kvcache_specs``, ``get_kv_cache_configs``,
``generate_scheduler_kv_cache_config``, ``get_kv_cache_capacity``,
``validate_block_size``, then ``resolve_kv_cache_block_sizes`` and the real
``Scheduler``) for ``tp`` workers that each hold the layer specs of
MODEL.json.  No model is loaded and no KV cache tensor is allocated; the
records are written by :func:`fpmcore_vllm027.observe.build_record` in the
shape of 02 §3.14, with ``lifecycle.measurement`` ``cache_planned`` and the
tensor-level paths in ``unresolved_fields`` (layout-level evidence,
``fpmcore.importer``, I-113).

MODEL.json is the format of ``examples/probes/README.md``; vLLM 0.27.0 knows
no KV cache layouts, so ``kv_cache_layout`` / ``supported_layouts`` are not
read.  The class table of 02 §5.1 allows ``FullAttentionSpec`` and
``SlidingWindowSpec`` only; other spec types are planned by vLLM but refused
by the import (I-41).

The runtime is the installed distribution: ``deployment.image`` and every
``runtime.image`` are ``local/vllm-cpu-dry-run@sha256:<d>`` and
``runtime.source_revision`` is ``<d>``, the SHA-256 of the installed
distribution's ``RECORD`` file (:func:`installed_digest`).

vLLM and torch are imported inside the functions; :func:`prepare_environment`
sets ``VLLM_TARGET_DEVICE=cpu`` and keeps the hub offline before vLLM is
imported.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

INDEX_SCHEMA = "fpmcore-runtime-observations/v1"
MANIFEST_SCHEMA = "fpmcore-runtime-probe-launch/v1"
PHASES = ("prefill", "decode")
DRY_RUN_IMAGE = "local/vllm-cpu-dry-run"

#: Environment vLLM needs on a CPU-only machine, set before it is imported.
ENVIRONMENT = {
    "VLLM_TARGET_DEVICE": "cpu",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_LOGGING_LEVEL": "ERROR",
}

#: The staged ``config.json`` vLLM's ``ModelConfig`` loads offline (no weights, no specs from it).
STUB_MODEL_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 8192,
    "intermediate_size": 512,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "head_dim": 64,
    "num_hidden_layers": 2,
    "vocab_size": 32000,
    "max_position_embeddings": 1 << 22,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}

_DTYPES = {
    "float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16",
    "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16", "uint8": "uint8",
    "int8": "int8", "float8_e4m3fn": "float8_e4m3fn", "fp8": "float8_e4m3fn",
    "fp8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
}  # fmt: skip

#: The KV cache dtype labels of 02 I-32 for ``cache_dtype`` ``auto``.
_AUTO_LABELS = {"torch.bfloat16": "bfloat16", "torch.float16": "half"}


class ModelJsonError(ValueError):
    """MODEL.json cannot be planned; the message names the key and the value."""


def prepare_environment() -> None:
    """Set the CPU environment vLLM needs, unless the caller set it already, and select vLLM's CPU platform.

    vLLM 0.27.0 detects its CPU platform only from a ``cpu`` in the installed
    version string (``vllm.platforms.cpu_platform_plugin``; vLLM 0.33.0 also
    reads ``VLLM_TARGET_DEVICE``), and ``import vllm`` resolves the platform.
    With the plain ``vllm==0.27.0`` wheel on a machine without a GPU it
    resolves ``UnspecifiedPlatform`` and ``VllmConfig`` refuses to build
    ("Failed to infer device type").  With ``VLLM_TARGET_DEVICE=cpu`` this
    replaces that platform by vLLM's ``CpuPlatform``, also where a loaded
    vLLM module holds it as ``current_platform``.
    """
    for key, value in ENVIRONMENT.items():
        os.environ.setdefault(key, value)
    if os.environ.get("VLLM_TARGET_DEVICE") != "cpu":
        return
    import sys

    from vllm import platforms
    from vllm.platforms.interface import UnspecifiedPlatform

    old = platforms.current_platform
    if not isinstance(old, UnspecifiedPlatform):
        return
    from vllm.platforms.cpu import CpuPlatform

    platforms._current_platform = CpuPlatform()
    for name, module in list(sys.modules.items()):
        if name.startswith("vllm.") and getattr(module, "current_platform", None) is old:
            module.current_platform = platforms._current_platform


def stub_config_bytes() -> bytes:
    """The bytes of the staged ``config.json`` (deterministic)."""
    return (json.dumps(STUB_MODEL_CONFIG, indent=1, sort_keys=True) + "\n").encode()


def installed_digest(distribution: str = "vllm") -> str:
    """SHA-256 of the installed distribution's ``RECORD`` file (deterministic for one installed wheel)."""
    from importlib import metadata

    for f in metadata.distribution(distribution).files or ():
        if f.name == "RECORD" and f.parent.name.endswith(".dist-info"):
            return hashlib.sha256(Path(str(f.locate())).read_bytes()).hexdigest()
    raise RuntimeError(f"the installed {distribution} distribution has no RECORD file")


def dry_run_image(digest: str) -> str:
    """The image of a dry run (02 §2.2 form ``<registry/name>@sha256:<64 hex>``)."""
    return f"{DRY_RUN_IMAGE}@sha256:{digest}"


# --------------------------------------------------------------------------
# MODEL.json → vLLM 0.27.0 objects
# --------------------------------------------------------------------------


def build_vllm_config(model: Mapping[str, Any], *, tp: int, caching: bool, model_dir: str) -> Any:
    """The engine core's ``VllmConfig`` before cache planning."""
    from vllm.config import (
        CacheConfig,
        ModelConfig,
        ParallelConfig,
        SchedulerConfig,
        VllmConfig,
    )

    max_model_len = int(model["max_model_len"])
    cache = dict(model.get("cache", {}))
    sched = dict(model.get("scheduler", {}))
    async_scheduling = sched.pop("async_scheduling", None)
    model_config = ModelConfig(
        model=model_dir,
        skip_tokenizer_init=True,
        max_model_len=max_model_len,
        dtype=model.get("model_dtype", "bfloat16"),
        seed=0,
    )
    cache_kwargs: dict[str, Any] = {"block_size": int(cache.pop("block_size", 16)), "enable_prefix_caching": caching}
    for key in ("cache_dtype", "gpu_memory_utilization", "num_gpu_blocks_override", "prefix_caching_hash_algo"):
        if cache.get(key) is not None:
            cache_kwargs[key] = cache[key]
    sched_kwargs: dict[str, Any] = {"max_model_len": max_model_len, "is_encoder_decoder": False, "enable_chunked_prefill": True}
    for key in ("max_num_batched_tokens", "max_num_seqs", "long_prefill_token_threshold", "policy"):
        if key in sched:
            sched_kwargs[key] = sched[key]
    vllm_config = VllmConfig(
        model_config=model_config,
        cache_config=CacheConfig(**cache_kwargs),
        scheduler_config=SchedulerConfig(**sched_kwargs),
        parallel_config=ParallelConfig(tensor_parallel_size=tp),
    )
    if async_scheduling is not None:  # the CPU platform forces synchronous scheduling; restore the GPU value
        vllm_config.scheduler_config.async_scheduling = bool(async_scheduling)
    return vllm_config


def _layer_names(entry: Mapping[str, Any]) -> list[str]:
    if "names" in entry:
        return list(entry["names"])
    template = entry["name"]
    if "indices" in entry:
        indices = list(entry["indices"])
    elif "range" in entry:
        indices = list(range(*entry["range"]))
    elif "count" in entry:
        indices = list(range(int(entry["count"])))
    else:
        return [template]
    return [template.format(i=i) for i in indices]


def build_spec(spec_json: Mapping[str, Any], vllm_config: Any) -> Any:
    """A ``KVCacheSpec`` of vLLM 0.27.0 from ``{"type": <class>, <fields>}``."""
    import torch
    from vllm.v1 import kv_cache_interface as kvi

    fields = dict(spec_json)
    type_name = fields.pop("type", None)
    cls = getattr(kvi, str(type_name), None)
    if not (isinstance(cls, type) and issubclass(cls, kvi.KVCacheSpec)):
        raise ModelJsonError(f"spec type {type_name!r} is not a KVCacheSpec of vllm.v1.kv_cache_interface")
    if "dtype" in fields:
        name = _DTYPES.get(str(fields["dtype"]).lower())
        if name is None:
            raise ModelJsonError(f"spec {type_name}: unknown dtype {fields['dtype']!r}; known: {', '.join(sorted(_DTYPES))}")
        fields["dtype"] = getattr(torch, name)
    if "kv_quant_mode" in fields:
        fields["kv_quant_mode"] = kvi.KVQuantMode[fields["kv_quant_mode"]]
    if fields.get("block_size", "auto") == "auto":
        fields["block_size"] = vllm_config.cache_config.block_size
    try:
        return cls(**fields)
    except TypeError as exc:
        raise ModelJsonError(f"spec {type_name}: {exc}") from None


def build_layer_specs(model: Mapping[str, Any], vllm_config: Any) -> dict[str, Any]:
    """``{layer name: spec}`` in model registration order (layer index, then entry order)."""
    rows = []
    for entry_idx, entry in enumerate(model["layers"]):
        spec = build_spec(entry["spec"], vllm_config)
        for name_idx, name in enumerate(_layer_names(entry)):
            match = re.search(r"layers\.(\d+)\.", name)
            rows.append((int(match.group(1)) if match else 10**9, entry_idx, name_idx, name, spec))
    if model.get("sort_by_layer_index", True):
        rows.sort(key=lambda r: r[:3])
    specs: dict[str, Any] = {}
    for *_, name, spec in rows:
        if name in specs:
            raise ModelJsonError(f"duplicate layer name {name}")
        specs[name] = spec
    return specs


def plan(model: Mapping[str, Any], *, tp: int, caching: bool, model_dir: str) -> SimpleNamespace:
    """The engine core's cache planning of vLLM 0.27.0 (``EngineCore.__init__`` / ``_initialize_kv_caches``), on CPU.

    Returns the engine core's ``vllm_config``, the workers' copy taken before
    the engine core updates the block size and capacity
    (``worker_vllm_config``), the per-rank ``KVCacheConfig`` objects
    (``worker_configs``), the scheduler copy (``scheduler_config``), the real
    ``Scheduler`` and the resolved block sizes.
    """
    prepare_environment()
    from vllm.v1.core.kv_cache_utils import (
        generate_scheduler_kv_cache_config,
        get_kv_cache_capacity,
        get_kv_cache_configs,
        resolve_kv_cache_block_sizes,
    )
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs
    from vllm.v1.structured_output import StructuredOutputManager

    vc = build_vllm_config(model, tp=tp, caching=caching, model_dir=model_dir)
    register_all_kvcache_specs(vc)
    layer_specs = build_layer_specs(model, vc)
    kv_cache_specs = [dict(layer_specs) for _ in range(tp)]
    if any(getattr(s, "non_causal", False) for s in layer_specs.values()):
        vc.scheduler_config.enable_chunked_prefill = False
        vc.cache_config.enable_prefix_caching = False
    available = int(model["available_memory_bytes"])
    worker_configs = get_kv_cache_configs(vc, kv_cache_specs, [available] * tp)
    worker_vc = copy.deepcopy(vc)  # the workers' copy: the engine core's updates below stay in it
    sched_cfg = generate_scheduler_kv_cache_config(worker_configs)
    vc.cache_config.num_gpu_blocks = sched_cfg.num_blocks
    if sched_cfg.kv_cache_groups:
        vc.cache_config.block_size = min(g.kv_cache_spec.block_size for g in sched_cfg.kv_cache_groups)
        num_tokens, max_concurrency = get_kv_cache_capacity(vc, sched_cfg)
        vc.cache_config.kv_cache_size_tokens = num_tokens
        vc.cache_config.kv_cache_max_concurrency = max_concurrency
    vc.validate_block_size()
    if not sched_cfg.kv_cache_groups:
        vc.scheduler_config.enable_chunked_prefill = False
    block_size, hash_block_size = resolve_kv_cache_block_sizes(sched_cfg, vc)
    scheduler = Scheduler(
        vllm_config=vc,
        kv_cache_config=sched_cfg,
        structured_output_manager=StructuredOutputManager(vc),
        block_size=block_size,
        hash_block_size=hash_block_size,
        log_stats=False,
    )
    return SimpleNamespace(
        vllm_config=vc,
        worker_vllm_config=worker_vc,
        layer_specs=layer_specs,
        worker_configs=worker_configs,
        scheduler_config=sched_cfg,
        scheduler=scheduler,
        available_memory_bytes=available,
        block_size=block_size,
        hash_block_size=hash_block_size,
    )


def plan_summary(p: SimpleNamespace) -> dict[str, Any]:
    """What vLLM 0.27.0 planned, read from its objects (for the command's report).

    The keys are those of the vLLM 0.33.0 summary; what vLLM 0.27.0 lacks
    (``kv_cache_layout``, ``mamba_cache_mode``, a group's
    ``startup_blocks_per_request``) is ``None``.
    """
    from vllm.v1.core.kv_cache_utils import _pool_bytes_per_block

    vc, sc = p.vllm_config, p.scheduler_config
    worker = p.worker_configs[0]
    groups = [
        {
            "group_id": gid,
            "spec_class": type(wg.kv_cache_spec).__name__,
            "layer_class": type(sg.kv_cache_spec).__name__,
            "num_layers": len(wg.layer_names),
            "block_size": sg.kv_cache_spec.block_size,
            "group_page_bytes": wg.kv_cache_spec.page_size_bytes,
            "startup_blocks_per_request": None,
        }
        for gid, (wg, sg) in enumerate(zip(worker.kv_cache_groups, sc.kv_cache_groups, strict=True))
    ]
    return {
        "kv_cache_layout": None,
        "enable_prefix_caching": bool(vc.cache_config.enable_prefix_caching),
        "mamba_cache_mode": None,
        "groups": groups,
        "pool_page_bytes": _pool_bytes_per_block(vc, worker.kv_cache_groups) if groups else 0,
        "num_blocks": sc.num_blocks,
        "free_blocks": p.scheduler.kv_cache_manager.block_pool.get_num_free_blocks(),
        "scheduler_block_size": p.block_size,
        "hash_block_size": p.hash_block_size,
        "kv_cache_max_concurrency": vc.cache_config.kv_cache_max_concurrency,
        "kv_cache_size_tokens": vc.cache_config.kv_cache_size_tokens,
    }


# --------------------------------------------------------------------------
# launch, sources, files
# --------------------------------------------------------------------------


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) else value
    return out


def kv_label(kv_cache_dtype: str, model_dtype: str) -> str | None:
    """The profile label of a KV cache dtype (02 I-32)."""
    if kv_cache_dtype == "auto":
        return _AUTO_LABELS.get(model_dtype)
    from fpmcore_vllm027.rules import KV_DTYPE_LABELS

    return KV_DTYPE_LABELS.get(kv_cache_dtype)


def default_launch(model: Mapping[str, Any], vllm_config: Any, *, configuration: str, tp: int, image: str, revision: str) -> dict:
    """The launch (02 §2.2) of a dry probe: MODEL.json's ``launch`` merged over these defaults.

    ``tp`` is always the probe's and ``deployment.image`` always the dry
    run's (the runtime that planned, I-26); ``revision`` (the SHA-256 of the
    MODEL.json bytes) is the default ``identity.model_revision``.
    """
    from fpmcore_vllm027.observe import FRAMEWORK_VERSION

    cc, sc = vllm_config.cache_config, vllm_config.scheduler_config
    label = kv_label(str(cc.cache_dtype), str(vllm_config.model_config.dtype)) or str(cc.cache_dtype)
    launch = {
        "identity": {
            "model": configuration,
            "model_revision": revision,
            "architecture": "unknown",
            "num_experts": 0,
            "framework": "vllm",
            "framework_version": FRAMEWORK_VERSION,
            "gpu": "cpu",
        },
        "topology": {"tp": tp, "pp": 1, "dp": 1, "moe_tp": 1, "moe_ep": 1, "cp": 1},
        "precision": {
            "gemm_quant_mode": "bfloat16",
            "moe_quant_mode": "bfloat16",
            "fmha_quant_mode": label,
            "kvcache_quant_mode": label,
            "comm_quant_mode": "half",
            "moe_backend": "auto",
            "attention_backend": "auto",
            "enable_wideep": False,
            "enable_eplb": False,
        },
        "collection": {
            "max_model_len": vllm_config.model_config.max_model_len,
            "max_num_batched_tokens": sc.max_num_batched_tokens,
            "max_num_seqs": sc.max_num_seqs,
            "gpu_memory_utilization": cc.gpu_memory_utilization,
            "async_scheduling": False,
            "enforce_eager": bool(vllm_config.model_config.enforce_eager),
            "warmup_iterations": 0,
            "mamba_cache_mode_override": None,
        },
        "model_config": {"path": "model-config.json", "sha256": hashlib.sha256(stub_config_bytes()).hexdigest()},
        "deployment": {"executor": "kubernetes", "image": image},
    }
    launch = _merge(launch, model.get("launch") or {})
    launch["topology"]["tp"] = tp
    launch["deployment"]["image"] = image
    return launch


def dumps(document: Any) -> bytes:
    """The bytes of one evidence file: strict JSON, one-space indent, final newline."""
    return (json.dumps(document, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode()


def record_file_name(record: Mapping[str, Any]) -> str:
    """The file name of a record (02 §2.3)."""
    rank = record["binding"]["rank"]
    if record["binding"]["kind"] == "worker":
        return f"runtime-observation-worker-dp{rank['dp']}-tp{rank['tp']}-pp{rank['pp']}.json"
    return f"runtime-observation-scheduler-dp{rank['dp']}.json"


def _write_new(path: Path, data: bytes) -> None:
    """Write atomically; an existing file is a failure (02 §2.3)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise FileExistsError(f"{path} exists; a probe never overwrites evidence")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def worker_source(p: SimpleNamespace, manifest: Mapping[str, Any], rank: int, model_identity: Mapping, digest: str) -> dict:
    """What a dry-run worker exposes: planned, no tensors, no GPU."""
    return {
        "kind": "worker",
        "dp_rank": 0,
        "launch": manifest,
        "vllm_config": p.worker_vllm_config,
        "kv_cache_config": p.worker_configs[rank],
        "kv_caches": None,
        "available_cache_bytes": p.available_memory_bytes,
        "hardware": None,
        "lifecycle": {"measurement": "cache_planned", "cache_initialized": False,
                      "warmup_completed": False, "capture_completed": False},
        "model": dict(model_identity),
        "image": dry_run_image(digest),
        "source_revision": digest,
    }  # fmt: skip


def scheduler_source(p: SimpleNamespace, manifest: Mapping[str, Any], model_identity: Mapping, digest: str) -> dict:
    """What the engine core exposes right after its scheduler is built."""
    return {
        "kind": "scheduler",
        "dp_rank": 0,
        "launch": manifest,
        "vllm_config": p.vllm_config,
        "kv_cache_config": p.scheduler_config,
        "scheduler": p.scheduler,
        "lifecycle": {"cache_initialized": True},
        "model": dict(model_identity),
        "image": dry_run_image(digest),
        "source_revision": digest,
    }


def dry_probe(
    model_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    tp: int = 1,
    caching: bool = True,
    configuration: str | None = None,
) -> dict[str, Any]:
    """Plan ``model_path`` with vLLM 0.27.0 for ``tp`` ranks and write the evidence folder ``out_dir`` (02 §2).

    Writes ``observations.json``, ``model-config.json`` and, per phase,
    ``<attempt>/<phase>/launch-manifest.json`` and one record per worker rank
    and scheduler, never overwriting a file.  Returns what vLLM planned, per phase.
    """
    prepare_environment()
    import vllm

    from fpmcore_vllm027.observe import FRAMEWORK_VERSION, build_record

    if vllm.__version__ != FRAMEWORK_VERSION:
        raise RuntimeError(f"the vllm_027 dry probe needs vLLM {FRAMEWORK_VERSION}; this process runs vLLM {vllm.__version__}")
    model_path, out = Path(model_path), Path(out_dir)
    raw = model_path.read_bytes()
    model = json.loads(raw)
    if not isinstance(model, dict) or not isinstance(model.get("layers"), list):
        raise ModelJsonError(f"{model_path}: MODEL.json must be an object with a 'layers' list")
    for key in ("max_model_len", "available_memory_bytes"):
        if not isinstance(model.get(key), int) or isinstance(model.get(key), bool):
            raise ModelJsonError(f"{model_path}: '{key}' must be an integer; got {model.get(key)!r}")
    if tp < 1:
        raise ModelJsonError(f"--tp must be at least 1; got {tp}")
    if (out / "observations.json").exists():
        raise FileExistsError(f"{out / 'observations.json'} exists; a probe never overwrites evidence")
    configuration = configuration or model.get("configuration") or model_path.stem
    digest = installed_digest()
    attempt = f"cpu-dry-tp{tp}-caching-{'on' if caching else 'off'}-{hashlib.sha256(raw).hexdigest()[:8]}"
    config_bytes = stub_config_bytes()
    config_sha = hashlib.sha256(config_bytes).hexdigest()
    files: dict[Path, bytes] = {Path("model-config.json"): config_bytes}
    summary: dict[str, Any] = {"configuration": configuration, "attempt_id": attempt, "phases": {}}
    phases: dict[str, Any] = {}
    launch = None
    with tempfile.TemporaryDirectory(prefix="fpm-dry-model-") as model_dir:
        Path(model_dir, "config.json").write_bytes(config_bytes)
        for phase in PHASES:
            p = plan(model, tp=tp, caching=caching, model_dir=model_dir)
            if launch is None:
                launch = default_launch(model, p.vllm_config, configuration=configuration, tp=tp,
                                        image=dry_run_image(digest), revision=hashlib.sha256(raw).hexdigest())  # fmt: skip
            identity = {"path": launch["identity"]["model"], "revision": launch["identity"]["model_revision"],
                        "config_sha256": config_sha, "loaded_config_commit": None}  # fmt: skip
            manifest = {
                "schema_version": MANIFEST_SCHEMA,
                "attempt_id": attempt,
                "configuration": configuration,
                "phase": phase,
                "launch": launch,
                "expected_ranks": {
                    "workers": [{"dp_rank": 0, "tp_rank": t, "pp_rank": 0} for t in range(tp)],
                    "schedulers": [{"dp_rank": 0}],
                },
            }
            folder = Path(attempt, phase)
            manifest_bytes = dumps(manifest)
            files[folder / "launch-manifest.json"] = manifest_bytes
            records = [build_record(worker_source(p, manifest, t, identity, digest), phase=phase, rank=t) for t in range(tp)]
            records.append(build_record(scheduler_source(p, manifest, identity, digest), phase=phase, rank=0))
            artifacts = []
            for record in records:
                rel = folder / record_file_name(record)
                data = dumps(record)
                files[rel] = data
                artifacts.append({"path": rel.as_posix(), "sha256": hashlib.sha256(data).hexdigest(), "kind": "observation"})
            if phase == PHASES[0]:
                artifacts.append({"path": "model-config.json", "sha256": config_sha, "kind": "model_config"})
            phases[phase] = {
                "launch_manifest": {"path": (folder / "launch-manifest.json").as_posix(),
                                    "sha256": hashlib.sha256(manifest_bytes).hexdigest()},
                "artifacts": artifacts,
            }  # fmt: skip
            summary["phases"][phase] = plan_summary(p)
    index = {
        "schema_version": INDEX_SCHEMA,
        "configurations": {
            configuration: {"launch": launch, "active_attempt_id": attempt, "attempts": [{"attempt_id": attempt, "phases": phases}]}
        },
    }
    files[Path("observations.json")] = dumps(index)
    clash = [str(out / rel) for rel in files if (out / rel).exists()]
    if clash:
        raise FileExistsError(f"{clash[0]} exists; a probe never overwrites evidence")
    for rel, data in files.items():  # the index last: a folder without it holds no evidence
        _write_new(out / rel, data)
    return summary

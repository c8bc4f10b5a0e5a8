#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Reference oracle built on the REAL vLLM 0.33.0 KV-cache code (CPU only).

**Vendored.** Upstream: the specification's vLLM oracle (``oracle/vllm_oracle.py``
beside the spec, with its ``setup.sh`` and ``examples/``), copied here in
fpmcore's "Real-vLLM harness copied into tools/" change and kept so that the
real-vLLM tests run without the spec's folder.  It differs from upstream in:

* the release-dependent entry points, found by feature, never by version
  (:func:`_optional`: cache planning in ``kv_cache_planning`` or
  ``kv_cache_utils``, ``update_kv_cache_capacity`` or 0.27.0's
  ``get_kv_cache_capacity``, the cache-hit alignment, the hash lookahead of
  ``get_request_block_hasher``), so that it drives vLLM 0.32.0 and 0.27.0 too;
* the installed runtime plugin's environment step (:func:`_select_runtime_platform`,
  vLLM 0.27.0's CPU platform) when fpmcore is installed beside vLLM;
* ``sched``: arrivals pass vLLM's front-end admission (:class:`FrontEnd`,
  ``AsyncLLM.check_admission`` with the real ``OutputProcessor``) built from
  :func:`engine_core_request`, and requests may carry content-block ids;
* docstrings that point to this repository's files instead of the spec's.

Changes of upstream are not merged back automatically: compare the two files
(``diff``) when the upstream oracle changes.

Run with the venv made by setup.sh:

    $ORACLE_PY vllm_oracle.py config  MODEL.json [--json]
    $ORACLE_PY vllm_oracle.py specs   MODEL.json
    $ORACLE_PY vllm_oracle.py trace   MODEL.json TRACE.json \
        [--caching off|on|both] [--json]
    $ORACLE_PY vllm_oracle.py bench   MODEL.json [--requests N]
        [--seed S] [--runs R] [--caching off|on] [--max-running K]
    $ORACLE_PY vllm_oracle.py sched   MODEL.json SCHED.json \
        [--caching off|on|both] [--json]

Nothing here re-implements vLLM's accounting: every number printed comes from
vLLM functions/classes (get_global_kv_cache_groups, get_kv_cache_configs,
generate_scheduler_kv_cache_config, resolve_kv_cache_block_sizes,
get_max_concurrency_for_kv_cache_config, KVCacheManager.allocate_slots,
Scheduler.schedule, ...).  The only glue is: building KVCacheSpec objects from
JSON, a stub model config directory (a 2-layer Llama config.json, never
loaded as weights), and the driver loops.  the capacity and replay chapters of the
specification describe the flow mirrored.

The MODEL.json format is documented in examples/probes/README.md.  fpmcore's
real-vLLM tests and tools (tools/vllm_sched.py, the `real` tests) run this
harness in an environment that has vLLM 0.33.0 (tox -e vllm033-real).
"""

from __future__ import annotations

import os
import sys

# ---------------------------------------------------------------------------
# Environment: must be settled before vllm/torch are imported.
# ---------------------------------------------------------------------------
_ENV = {
    # vLLM's platform detection: without this the platform is "unspecified"
    # and VllmConfig() fails to infer a device.
    "VLLM_TARGET_DEVICE": "cpu",
    # No network: never try the HF hub.
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    # Determinism of set/dict-of-bytes iteration and of NONE_HASH.
    "PYTHONHASHSEED": "0",
}


def _ensure_env() -> None:
    need_reexec = os.environ.get("PYTHONHASHSEED") != _ENV["PYTHONHASHSEED"]
    for key, value in _ENV.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    if need_reexec and not os.environ.get("_VLLM_ORACLE_REEXEC"):
        os.environ["PYTHONHASHSEED"] = _ENV["PYTHONHASHSEED"]
        os.environ["_VLLM_ORACLE_REEXEC"] = "1"
        os.execv(sys.executable, [sys.executable, *sys.argv])


if __name__ == "__main__":
    # --log-level must be known before vllm configures its logger.
    for i, arg in enumerate(sys.argv):
        if arg == "--log-level" and i + 1 < len(sys.argv):
            os.environ["VLLM_LOGGING_LEVEL"] = sys.argv[i + 1].upper()
    _ensure_env()

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from fractions import Fraction  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402
from typing import Any  # noqa: E402

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import vllm  # noqa: E402
from vllm.config import (  # noqa: E402
    CacheConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import get_hash_fn_by_name  # noqa: E402
from vllm.utils.math_utils import cdiv  # noqa: E402
from vllm.v1 import kv_cache_interface as kvi  # noqa: E402
from vllm.v1.attention.backend import MultipleOf  # noqa: E402
from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheManager  # noqa: E402
from vllm.v1.core.kv_cache_utils import (  # noqa: E402
    generate_scheduler_kv_cache_config,
    get_max_concurrency_for_kv_cache_config,
    get_request_block_hasher,
    init_none_hash,
    resolve_kv_cache_block_sizes,
)
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.core.single_type_kv_cache_manager import (  # noqa: E402
    register_all_kvcache_specs,
)
from vllm.v1.kv_cache_spec_registry import KVCacheSpecRegistry  # noqa: E402
from vllm.v1.request import Request, RequestStatus  # noqa: E402

ORACLE_VERSION = "1"


# ---------------------------------------------------------------------------
# What the scheduler path needs that differs between vLLM releases.  The
# harness drives the installed release's own code; these are only the entry
# points that moved or changed signature (feature-detected, never by version):
#
# * cache planning: vLLM 0.33.0 resolves the layout and the global groups
#   first and plans in ``kv_cache_planning`` (``get_kv_cache_configs`` takes
#   the groups); 0.32.0 resolves the layout and plans in ``kv_cache_utils``
#   with three arguments; 0.27.0 has no layouts;
# * capacity: ``update_kv_cache_capacity`` (block size from the
#   prefix-cacheable groups) or 0.27.0's ``get_kv_cache_capacity`` (the
#   smallest group block); 0.27.0 has no cache-hit alignment;
# * ``get_request_block_hasher`` takes the hash lookahead in 0.33.0 only;
# * ``AsyncLLM.check_admission`` (``max_num_queued_*``) does not exist in 0.27.0,
#   whose front end admits every request;
# * vLLM 0.27.0 detects its CPU platform only from its version string: the
#   installed runtime plugin's ``prepare_environment`` selects it.
# ---------------------------------------------------------------------------
def _optional(module: str, name: str) -> Any:
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


_PLANNING_MODULE = (
    "vllm.v1.core.kv_cache_planning"
    if _optional("vllm.v1.core.kv_cache_planning", "get_kv_cache_configs") is not None
    else "vllm.v1.core.kv_cache_utils"
)
get_kv_cache_configs = _optional(_PLANNING_MODULE, "get_kv_cache_configs")
_pool_bytes_per_block = _optional(_PLANNING_MODULE, "_pool_bytes_per_block")
get_global_kv_cache_groups = _optional(_PLANNING_MODULE, "get_global_kv_cache_groups")
resolve_kv_cache_layout = _optional("vllm.v1.attention.backends.utils", "resolve_kv_cache_layout")
update_kv_cache_capacity = _optional("vllm.v1.core.kv_cache_utils", "update_kv_cache_capacity")
get_kv_cache_capacity = _optional("vllm.v1.core.kv_cache_utils", "get_kv_cache_capacity")
resolve_cache_hit_alignment_tokens = _optional("vllm.v1.core.kv_cache_utils", "resolve_cache_hit_alignment_tokens")


def _select_runtime_platform() -> None:
    """The installed runtime plugin's environment step (vLLM's CPU platform), when fpmcore is installed here."""
    try:
        import importlib

        from fpmcore.host.build import build_host
    except ImportError:
        return
    host = build_host(environ={})
    try:
        record = host.select_runtime(f"vllm=={vllm.__version__}")
    except Exception:  # no runtime plugin for this release: nothing to prepare
        return
    package = getattr(host.pm.get_plugin(record.id), "package", None)
    if package is not None:
        probe = importlib.import_module(f"{package}.probe")
        if hasattr(probe, "prepare_environment"):
            probe.prepare_environment()


_select_runtime_platform()
DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "fp8": torch.float8_e4m3fn,
    "fp8_e4m3": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
}

# A 2-layer Llama config.json: only used so that vLLM's real ModelConfig can be
# constructed offline (architecture inspection, max_model_len checks).  The KV
# cache specs never come from this model: they come from MODEL.json.
_FAKE_MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 32000,
    "max_position_embeddings": 1 << 22,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}


def _fake_model_dir() -> str:
    root = Path(os.environ.get("VLLM_ORACLE_CACHE", Path.home() / ".cache" / "vllm_oracle"))
    model_dir = root / "fake_llama"
    cfg = model_dir / "config.json"
    text = json.dumps(_FAKE_MODEL_CONFIG, indent=1, sort_keys=True)
    if not cfg.exists() or cfg.read_text() != text:
        model_dir.mkdir(parents=True, exist_ok=True)
        cfg.write_text(text)
    return str(model_dir)


# ---------------------------------------------------------------------------
# MODEL.json -> VllmConfig + per-layer KVCacheSpec
# ---------------------------------------------------------------------------
def _to_dtype(value: Any) -> torch.dtype:
    if isinstance(value, torch.dtype):
        return value
    try:
        return DTYPES[str(value).lower()]
    except KeyError as exc:
        raise ValueError(f"unknown dtype {value!r}; known: {sorted(DTYPES)}") from exc


def _to_fraction_or_int(value: Any) -> int | Fraction:
    if isinstance(value, str) and "/" in value:
        return Fraction(value)
    return int(value)


def build_vllm_config(model: dict, enable_prefix_caching: bool) -> VllmConfig:
    """A real VllmConfig, as the engine core would hold it before KV planning."""
    max_model_len = int(model["max_model_len"])
    cache = dict(model.get("cache", {}))
    sched = dict(model.get("scheduler", {}))
    block_size = int(cache.pop("block_size", 16))
    async_scheduling = sched.pop("async_scheduling", None)
    model_config = ModelConfig(
        model=_fake_model_dir(),
        skip_tokenizer_init=True,
        max_model_len=max_model_len,
        dtype=model.get("model_dtype", "bfloat16"),
        seed=0,
    )
    cache_kwargs = dict(
        block_size=block_size,
        enable_prefix_caching=enable_prefix_caching,
    )
    for key in (
        "mamba_block_size",
        "mamba_page_size_padded",
        "prefix_match_unit",
        "prefix_cache_retention_interval",
        "num_gpu_blocks_override",
        "enable_mamba_shared_prefix_checkpoint",
        "prefix_caching_hash_algo",
    ):
        if key in cache and cache[key] is not None:
            cache_kwargs[key] = cache[key]
    # mamba_block_size may only be set together with prefix caching
    # (VllmConfig.validate_mamba_block_size).
    if not enable_prefix_caching:
        cache_kwargs.pop("mamba_block_size", None)
    cache_config = CacheConfig(**cache_kwargs)
    sched_kwargs = dict(
        max_model_len=max_model_len,
        is_encoder_decoder=False,
        enable_chunked_prefill=True,
    )
    for key in (
        "max_num_batched_tokens",
        "max_num_scheduled_tokens",
        "max_num_seqs",
        "max_num_active_seqs",
        "long_prefill_token_threshold",
        "long_prefill_token_threshold_adaptive",
        "prefill_schedule_interval",
        "max_num_queued_reqs",
        "max_num_queued_tokens",
        "scheduler_reserve_full_isl",
        "watermark",
        "policy",
    ):
        if key in sched:
            sched_kwargs[key] = sched[key]
    scheduler_config = SchedulerConfig(**sched_kwargs)
    vllm_config = VllmConfig(
        model_config=model_config,
        cache_config=cache_config,
        scheduler_config=scheduler_config,
    )
    if async_scheduling is not None:
        # The CPU platform forces async_scheduling=False in its
        # check_and_update_config; restore the GPU-like value if requested
        # (it only changes VllmConfig.max_in_flight_tokens).
        vllm_config.scheduler_config.async_scheduling = bool(async_scheduling)
    if has_mamba(model):
        # Real vLLM code: derive mamba_cache_mode / mamba_block_size from
        # enable_prefix_caching exactly as hybrid models do at startup.
        from vllm.model_executor.models.config import MambaModelConfig

        MambaModelConfig.verify_and_update_config(vllm_config)
    return vllm_config


def has_mamba(model: dict) -> bool:
    return any(entry["spec"]["type"] == "MambaSpec" for entry in model["layers"])


def _layer_names(entry: dict) -> list[str]:
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


def build_spec(spec_json: dict, vllm_config: VllmConfig) -> kvi.KVCacheSpec:
    """KVCacheSpec subclass instance from a JSON dict {"type": ClassName, ...}."""
    fields = dict(spec_json)
    type_name = fields.pop("type")
    cls = getattr(kvi, type_name, None)
    if not (isinstance(cls, type) and issubclass(cls, kvi.KVCacheSpec)):
        raise ValueError(f"{type_name!r} is not a KVCacheSpec in kv_cache_interface")
    cache_config = vllm_config.cache_config
    import dataclasses

    if (
        dataclasses.is_dataclass(cls)
        and "max_tp_shards" in fields
        and "max_tp_shards" not in {f.name for f in dataclasses.fields(cls)}
    ):
        # vLLM 0.27.0's MLA spec has no TP shard count: one shard, as the JSON says.
        if int(fields.pop("max_tp_shards")) != 1:
            raise ValueError(f"{type_name} of this vLLM has no max_tp_shards")
    if "dtype" in fields:
        fields["dtype"] = _to_dtype(fields["dtype"])
    if "dtypes" in fields:
        fields["dtypes"] = tuple(_to_dtype(d) for d in fields["dtypes"])
    if "shapes" in fields:
        fields["shapes"] = tuple(tuple(int(x) for x in s) for s in fields["shapes"])
    if "tokens_per_state" in fields:
        fields["tokens_per_state"] = _to_fraction_or_int(fields["tokens_per_state"])
    if "mamba_type" in fields:
        fields["mamba_type"] = MambaAttentionBackendEnum[fields["mamba_type"]]
    if "cache_role" in fields:
        fields["cache_role"] = kvi.SparseCacheRole(fields["cache_role"])
    if "kv_quant_mode" in fields:
        fields["kv_quant_mode"] = kvi.KVQuantMode[fields["kv_quant_mode"]]
    bsa = fields.get("block_stride_alignment")
    if isinstance(bsa, dict):
        fields["block_stride_alignment"] = MultipleOf(int(bsa["multiple_of"]))
    if cls is kvi.MambaSpec or issubclass(cls, kvi.MambaSpec):
        # Mirror MambaBase.get_kv_cache_spec (model_executor/layers/mamba/
        # abstract.py:72-91): block size, padding and mode come from the cache
        # config unless pinned in the JSON.
        if fields.get("block_size", "auto") == "auto":
            fields["block_size"] = cache_config.mamba_block_size
        if fields.get("page_size_padded", "auto") == "auto":
            fields["page_size_padded"] = cache_config.mamba_page_size_padded
        if fields.get("mamba_cache_mode", "auto") == "auto":
            fields["mamba_cache_mode"] = cache_config.mamba_cache_mode
    elif fields.get("block_size", "auto") == "auto":
        fields["block_size"] = cache_config.block_size
    return cls(**fields)


def build_layer_specs(model: dict, vllm_config: VllmConfig) -> dict[str, kvi.KVCacheSpec]:
    """Ordered {layer_name: spec}, in model layer order (the order vLLM's
    static_forward_context / get_kv_cache_spec would produce)."""
    rows: list[tuple[int, int, int, str, kvi.KVCacheSpec]] = []
    for entry_idx, entry in enumerate(model["layers"]):
        spec = build_spec(entry["spec"], vllm_config)
        for name_idx, name in enumerate(_layer_names(entry)):
            match = re.search(r"layers\.(\d+)\.", name)
            layer_idx = int(match.group(1)) if match else 10**9
            rows.append((layer_idx, entry_idx, name_idx, name, spec))
    if model.get("sort_by_layer_index", True):
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
    specs: dict[str, kvi.KVCacheSpec] = {}
    for *_, name, spec in rows:
        if name in specs:
            raise ValueError(f"duplicate layer name {name}")
        specs[name] = spec
    return specs


# ---------------------------------------------------------------------------
# The engine-core KV planning flow (v1/engine/core.py:_initialize_kv_caches)
# ---------------------------------------------------------------------------
class Plan(SimpleNamespace):
    pass


def plan_kv_cache(model: dict, enable_prefix_caching: bool) -> Plan:
    vllm_config = build_vllm_config(model, enable_prefix_caching)
    register_all_kvcache_specs(vllm_config)
    layer_specs = build_layer_specs(model, vllm_config)
    kv_cache_specs = [layer_specs]  # one worker (TP=1/PP=1 view)

    # The workers' backends report their supported layouts; here the JSON
    # does.  "kv_cache_layout" pins one (like a backend that supports only
    # that layout); otherwise "supported_layouts" (most preferred first) or
    # vLLM's default preference order is used.  resolve_kv_cache_layout then
    # applies the real narrowing rules (mixed HNC shapes -> block-compact).
    if model.get("kv_cache_layout"):
        supported_layouts = [[model["kv_cache_layout"]]]
    elif model.get("supported_layouts"):
        supported_layouts = [list(model["supported_layouts"])]
    else:
        supported_layouts = [["LBNHC", "LBHNC", "BLNHC", "BLHNC", "BHLNC", "LHBNC"]]
    layout = None
    if resolve_kv_cache_layout is not None:  # a release with KV cache layouts
        layout = resolve_kv_cache_layout(
            vllm_config,
            supported_layouts,
            [s for specs in kv_cache_specs for s in specs.values()],
        )
    available = int(float(model["available_memory_bytes"]))
    if get_global_kv_cache_groups is not None:
        global_groups = get_global_kv_cache_groups(vllm_config, kv_cache_specs)
        kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs, [available], global_groups)
    else:
        kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs, [available])
    if layout is not None:
        for cfg in kv_cache_configs:
            cfg.kv_cache_layout = vllm_config.cache_config.kv_cache_layout
    sched_cfg = generate_scheduler_kv_cache_config(kv_cache_configs)
    vllm_config.cache_config.num_gpu_blocks = sched_cfg.num_blocks
    groups = sched_cfg.kv_cache_groups
    if groups and update_kv_cache_capacity is not None:
        participating = [g.kv_cache_spec.block_size for g in groups if g.kv_cache_spec.prefix_cacheable]
        vllm_config.cache_config.block_size = min(participating or [g.kv_cache_spec.block_size for g in groups])
        update_kv_cache_capacity(vllm_config, sched_cfg)
    elif groups:
        vllm_config.cache_config.block_size = min(g.kv_cache_spec.block_size for g in groups)
        (
            vllm_config.cache_config.kv_cache_size_tokens,
            vllm_config.cache_config.kv_cache_max_concurrency,
        ) = get_kv_cache_capacity(vllm_config, sched_cfg)
    vllm_config.validate_block_size()
    scheduler_block_size, hash_block_size = resolve_kv_cache_block_sizes(sched_cfg, vllm_config)
    cache_hit_alignment = None
    if resolve_cache_hit_alignment_tokens is not None:
        cache_hit_alignment = resolve_cache_hit_alignment_tokens(
            sched_cfg, vllm_config, scheduler_block_size, hash_block_size
        )
        for cfg in (*kv_cache_configs, sched_cfg):
            cfg.hash_block_size = hash_block_size
            cfg.cache_hit_alignment_tokens = cache_hit_alignment
    return Plan(
        model=model,
        enable_prefix_caching=enable_prefix_caching,
        vllm_config=vllm_config,
        layer_specs=layer_specs,
        layout=layout,
        worker_config=kv_cache_configs[0],
        sched_config=sched_cfg,
        scheduler_block_size=scheduler_block_size,
        hash_block_size=hash_block_size,
        cache_hit_alignment_tokens=cache_hit_alignment,
    )


def _spec_summary(spec: kvi.KVCacheSpec) -> dict:
    out: dict[str, Any] = {"type": type(spec).__name__, "block_size": spec.block_size}
    for key in (
        "num_kv_heads",
        "head_size",
        "head_size_v",
        "dtype",
        "tokens_per_state",
        "cache_role",
        "page_size_padded",
        "sliding_window",
        "attention_chunk_size",
        "mamba_cache_mode",
        "num_speculative_blocks",
        "num_prefill_checkpoint_blocks",
        "prefill_checkpoint_alignment",
        "shapes",
        "dtypes",
        "dcp_sharded",
    ):
        try:
            value = getattr(spec, key)
        except (AttributeError, NotImplementedError):
            continue
        if value is None:
            continue
        if isinstance(value, torch.dtype):
            value = str(value).replace("torch.", "")
        elif isinstance(value, tuple) and value and isinstance(value[0], torch.dtype):
            value = [str(v).replace("torch.", "") for v in value]
        elif hasattr(value, "value") and not isinstance(value, (int, float)):
            value = value.value
        elif isinstance(value, Fraction):
            value = str(value)
        out[key] = value
    out["page_size_bytes"] = spec.page_size_bytes
    out["prefix_cacheable"] = getattr(spec, "prefix_cacheable", None)  # a property newer than vLLM 0.27.0
    return out


def plan_report(plan: Plan) -> dict:
    vc = plan.vllm_config
    wc = plan.worker_config
    sc = plan.sched_config
    groups = []
    for gid, (wg, sg) in enumerate(zip(wc.kv_cache_groups, sc.kv_cache_groups)):
        wspec = wg.kv_cache_spec
        if isinstance(wspec, kvi.UniformTypeKVCacheSpecs):
            per_layer = [wspec.kv_cache_specs[name] for name in wg.layer_names]
        else:
            per_layer = [wspec] * len(wg.layer_names)
        type_counts: dict[str, int] = {}
        page_counts: dict[str, int] = {}
        for spec in per_layer:
            type_counts[type(spec).__name__] = type_counts.get(type(spec).__name__, 0) + 1
            key = str(spec.page_size_bytes)
            page_counts[key] = page_counts.get(key, 0) + 1
        sspec = sg.kv_cache_spec
        role = getattr(sg, "role", None)  # group roles are newer than vLLM 0.27.0
        manager_cls = (
            KVCacheSpecRegistry.get_manager_class(sspec, role)
            if role is not None
            else KVCacheSpecRegistry.get_manager_class(sspec)
        )
        req_blocks = cdiv(sspec.max_memory_usage_bytes(vc), sspec.page_size_bytes)
        groups.append(
            {
                "group_id": gid,
                "num_layers": len(wg.layer_names),
                "layer_names": wg.layer_names,
                "worker_spec_type": type(wspec).__name__,
                "layer_spec_types": type_counts,
                "layer_page_sizes": page_counts,
                "group_page_size_bytes": wspec.page_size_bytes,
                "scheduler_spec": _spec_summary(sspec),
                "manager": manager_cls.__name__ if manager_cls else None,
                "blocks_per_request_at_max_model_len": req_blocks,
                "max_num_blocks_per_req": sspec.max_num_blocks_per_req(vc, vc.model_config.max_model_len),
            }
        )
    tensors = []
    for t in wc.kv_cache_tensors:
        layers = getattr(t, "layers", None) or getattr(t, "shared_by", [])  # vLLM 0.27.0: shared_by
        tensors.append(
            {
                "num_layers": len(layers),
                "first_layer": layers[0] if layers else None,
                "size": t.size,
                "layer_stride": getattr(t, "layer_stride", None),
                "block_stride": t.block_stride,
                "offset": t.offset,
            }
        )
    bytes_per_block = _pool_bytes_per_block(vc, wc.kv_cache_groups)
    return {
        "vllm_version": vllm.__version__,
        "oracle_version": ORACLE_VERSION,
        "enable_prefix_caching": plan.enable_prefix_caching,
        "max_model_len": vc.model_config.max_model_len,
        "available_memory_bytes": int(float(plan.model["available_memory_bytes"])),
        "kv_cache_layout": plan.layout.name if plan.layout is not None else None,
        "mamba_cache_mode": vc.cache_config.mamba_cache_mode,
        "mamba_block_size": vc.cache_config.mamba_block_size,
        "num_layers": len(plan.layer_specs),
        "num_groups": len(groups),
        "groups": groups,
        "bytes_per_block": bytes_per_block,
        "num_blocks": wc.num_blocks,
        "usable_blocks": wc.num_blocks - 1,
        "kv_cache_tensors": tensors,
        "kv_cache_max_concurrency": vc.cache_config.kv_cache_max_concurrency,
        "kv_cache_size_tokens": vc.cache_config.kv_cache_size_tokens,
        "max_concurrency_recomputed": get_max_concurrency_for_kv_cache_config(vc, sc),
        "final_cache_block_size": vc.cache_config.block_size,
        "scheduler_block_size": plan.scheduler_block_size,
        "hash_block_size": plan.hash_block_size,
        "cache_hit_alignment_tokens": plan.cache_hit_alignment_tokens,
        "max_in_flight_tokens": vc.max_in_flight_tokens,
        "max_num_batched_tokens": vc.scheduler_config.max_num_batched_tokens,
    }


def print_plan(rep: dict, show_layers: bool = False) -> None:
    p = print
    p(f"== vLLM {rep['vllm_version']} KV cache plan (prefix caching {'ON' if rep['enable_prefix_caching'] else 'OFF'})")
    p(
        f"max_model_len={rep['max_model_len']} available={rep['available_memory_bytes']} "
        f"layout={rep['kv_cache_layout']} mamba_cache_mode={rep['mamba_cache_mode']} "
        f"mamba_block_size={rep['mamba_block_size']}"
    )
    p(f"layers={rep['num_layers']} groups={rep['num_groups']}")
    for g in rep["groups"]:
        s = g["scheduler_spec"]
        p(
            f"  group {g['group_id']}: {g['num_layers']} layers {g['layer_spec_types']} "
            f"[{g['worker_spec_type']}] manager={g['manager']}"
        )
        p(
            f"     block_size={s['block_size']} group_page={g['group_page_size_bytes']} "
            f"layer_pages={g['layer_page_sizes']} prefix_cacheable={s['prefix_cacheable']}"
        )
        p(
            f"     blocks/request@max_model_len={g['blocks_per_request_at_max_model_len']} "
            f"max_num_blocks_per_req={g['max_num_blocks_per_req']}"
        )
        if show_layers:
            p(f"     layers: {g['layer_names']}")
    p(
        f"bytes_per_block={rep['bytes_per_block']} num_blocks={rep['num_blocks']} "
        f"(usable {rep['usable_blocks']}, 1 null block)"
    )
    p(
        f"kv_cache_tensors={len(rep['kv_cache_tensors'])} "
        f"backing size={rep['kv_cache_tensors'][0]['size'] if rep['kv_cache_tensors'] else 0}"
    )
    p(
        f"kv_cache_max_concurrency={rep['kv_cache_max_concurrency']:.6f} "
        f"kv_cache_size_tokens={rep['kv_cache_size_tokens']}"
    )
    p(
        f"cache_config.block_size(final)={rep['final_cache_block_size']} "
        f"scheduler_block_size={rep['scheduler_block_size']} "
        f"hash_block_size={rep['hash_block_size']} "
        f"cache_hit_alignment_tokens={rep['cache_hit_alignment_tokens']}"
    )
    p(f"max_in_flight_tokens={rep['max_in_flight_tokens']} max_num_batched_tokens={rep['max_num_batched_tokens']}")


def _safe_attr(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name)
    except (AttributeError, NotImplementedError):
        return None


def spec_table(model: dict, enable_prefix_caching: bool) -> list[dict]:
    """Per MODEL.json layer entry: the spec as vLLM builds it and its
    page_size_bytes / max_memory_usage_bytes / max_num_blocks_per_req, with
    no grouping (so any mix of spec classes can be evaluated)."""
    vc = build_vllm_config(model, enable_prefix_caching)
    register_all_kvcache_specs(vc)
    rows = []
    for entry in model["layers"]:
        spec = build_spec(entry["spec"], vc)
        mem = spec.max_memory_usage_bytes(vc)
        rows.append(
            {
                "entry": entry.get("name") or entry.get("names", ["?"])[0],
                "num_layers": len(_layer_names(entry)),
                **_spec_summary(spec),
                "real_page_size_bytes": _safe_attr(spec, "real_page_size_bytes"),
                "max_memory_usage_bytes": mem,
                "startup_blocks_per_request": cdiv(mem, spec.page_size_bytes) if spec.page_size_bytes else None,
                "max_num_blocks_per_req": spec.max_num_blocks_per_req(vc, vc.model_config.max_model_len),
                "uniform_type_base": getattr(KVCacheSpecRegistry.get_uniform_type_base_spec(spec), "__name__", None),
                "manager": getattr(KVCacheSpecRegistry.get_manager_class(spec), "__name__", None),
            }
        )
    return rows


# ---------------------------------------------------------------------------
# Request helpers
# ---------------------------------------------------------------------------
VOCAB = 32000


def make_block_hasher(plan: Plan):
    vc = plan.vllm_config
    if not vc.cache_config.enable_prefix_caching:
        return None
    hash_fn = get_hash_fn_by_name(vc.cache_config.prefix_caching_hash_algo)
    init_none_hash(hash_fn)
    lookahead = getattr(vc, "num_hash_lookahead_tokens", None)
    if lookahead is None:  # a release without lookahead hashes
        return get_request_block_hasher(plan.hash_block_size, hash_fn)
    return get_request_block_hasher(plan.hash_block_size, hash_fn, lookahead)


def make_prompts(req_defs: dict) -> dict[str, list[int]]:
    """Prompt token ids of SCHED.json requests: given (``prompt_tokens``), drawn from the request's seed
    after a prefix copied from an earlier request (``prefix_from``/``prefix_len``), or made of content
    blocks (``hash_ids``, one id per ``hash_block_tokens`` tokens, the last block possibly partial): one
    draw per distinct (block size, id), so two prompts' blocks hold the same tokens exactly where their
    ids agree."""
    prompts: dict[str, list[int]] = {}
    blocks: dict[tuple[int, int], list[int]] = {}
    for rid, d in req_defs.items():
        if "prompt_tokens" in d:
            prompts[rid] = [int(t) for t in d["prompt_tokens"]]
            continue
        if "hash_ids" in d:
            size, total = int(d["hash_block_tokens"]), int(d["prompt_len"])
            tokens: list[int] = []
            for k, block_id in enumerate(d["hash_ids"]):
                if (size, block_id) not in blocks:
                    brng = random.Random(f"block:{size}:{block_id}")
                    blocks[size, block_id] = [brng.randrange(1, VOCAB) for _ in range(size)]
                tokens += blocks[size, block_id][: total - k * size]
            prompts[rid] = tokens
            continue
        rng = random.Random(int(d.get("seed", 0)) * 1_000_003 + len(prompts))
        total = int(d["prompt_len"])
        prefix: list[int] = []
        if "prefix_from" in d:
            src = prompts[d["prefix_from"]]
            prefix = list(src[: int(d.get("prefix_len", len(src)))])
        body = [rng.randrange(1, VOCAB) for _ in range(max(0, total - len(prefix)))]
        prompts[rid] = (prefix + body)[:total]
    return prompts


def new_request(rid: str, prompt: list[int], max_tokens: int, hasher, arrival: float) -> Request:
    return Request(
        request_id=rid,
        prompt_token_ids=list(prompt),
        sampling_params=SamplingParams(max_tokens=max_tokens),
        pooling_params=None,
        arrival_time=arrival,
        block_hasher=hasher,
    )


def sampled_token(rid: str, position: int) -> int:
    """Deterministic fake sampled token (no model is run)."""
    return (sum(map(ord, rid)) * 7919 + position * 104729) % (VOCAB - 1) + 1


def mamba_split_shim(plan: Plan, kv_manager: KVCacheManager) -> SimpleNamespace | None:
    """An object carrying exactly the attributes that the REAL
    Scheduler._mamba_block_aligned_split reads; values derived as in
    Scheduler.__init__ (v1/core/sched/scheduler.py:425-464)."""
    vc = plan.vllm_config
    cfg = plan.sched_config
    has_mamba = cfg.has_mamba_layers
    if not (has_mamba and vc.cache_config.mamba_cache_mode == "align"):
        return None
    mamba_specs = [g.kv_cache_spec for g in cfg.kv_cache_groups if isinstance(g.kv_cache_spec, kvi.MambaSpec)]
    partial = plan.hash_block_size < plan.scheduler_block_size and kv_manager.coordinator.enable_partial_hash_hits
    sched_cfg = vc.scheduler_config
    return SimpleNamespace(
        cache_config=vc.cache_config,
        scheduler_config=sched_cfg,
        hash_block_size=plan.hash_block_size,
        block_size=plan.scheduler_block_size,
        mamba_partial_cache_hit=partial,
        use_eagle_block_drop=False,
        num_hash_lookahead_tokens=vc.num_hash_lookahead_tokens,
        mamba_has_prefill_checkpoint_blocks=all(s.num_prefill_checkpoint_blocks > 0 for s in mamba_specs),
        mamba_prefill_checkpoint_alignment=(mamba_specs[0].prefill_checkpoint_alignment if mamba_specs else None),
        max_num_scheduled_tokens=(
            sched_cfg.max_num_scheduled_tokens
            if sched_cfg.max_num_scheduled_tokens is not None
            else sched_cfg.max_num_batched_tokens
        ),
        mamba_shared_prefix_checkpoint=partial and kv_manager.mamba_shared_prefix_checkpoint,
    )


def make_kv_manager(plan: Plan, log_stats: bool = False) -> KVCacheManager:
    """Same arguments Scheduler.__init__ passes (scheduler.py:351-370)."""
    vc = plan.vllm_config
    return KVCacheManager(
        kv_cache_config=plan.sched_config,
        max_model_len=vc.model_config.max_model_len,
        max_in_flight_tokens=vc.max_in_flight_tokens,
        enable_caching=vc.cache_config.enable_prefix_caching,
        use_eagle=False,
        num_hash_lookahead_tokens=vc.num_hash_lookahead_tokens,
        num_prefill_lookahead=vc.num_prefill_lookahead_tokens,
        log_stats=log_stats,
        enable_kv_cache_events=False,
        dcp_world_size=vc.parallel_config.decode_context_parallel_size,
        pcp_world_size=1,
        scheduler_block_size=plan.scheduler_block_size,
        hash_block_size=plan.hash_block_size,
        metrics_collector=None,
        watermark=vc.scheduler_config.watermark,
        enable_mamba_shared_prefix_checkpoint=(vc.cache_config.enable_mamba_shared_prefix_checkpoint),
    )


def request_block_counts(kv: KVCacheManager, rid: str) -> list[list[int]]:
    """Per group: [blocks held (non-null), block-table length]."""
    out = []
    for mgr in kv.coordinator.single_type_managers:
        blocks = mgr.req_to_blocks.get(rid) or []
        held = sum(1 for b in blocks if not b.is_null)
        out.append([held, len(blocks)])
    return out


# ---------------------------------------------------------------------------
# (b) KVCacheManager trace driver
# ---------------------------------------------------------------------------
class ManagerDriver:
    """Drives the real KVCacheManager the way Scheduler.schedule() does for
    one request per op (admission: get_computed_blocks + allocate_slots with
    full_sequence_must_fit; running: allocate_slots; finish: free)."""

    def __init__(self, plan: Plan, prompts: dict[str, list[int]], max_tokens: dict[str, int]):
        self.plan = plan
        self.vc = plan.vllm_config
        self.kv = make_kv_manager(plan)
        self.hasher = make_block_hasher(plan)
        self.shim = mamba_split_shim(plan, self.kv)
        self.prompts = prompts
        self.max_tokens = max_tokens
        self.requests: dict[str, Request] = {}
        self.running: list[str] = []
        self.arrival = 0.0
        self.reserve_full_isl = self.vc.scheduler_config.scheduler_reserve_full_isl

    def _get(self, rid: str) -> Request:
        req = self.requests.get(rid)
        if req is None:
            self.arrival += 1.0
            req = new_request(rid, self.prompts[rid], self.max_tokens.get(rid, 1 << 20), self.hasher, self.arrival)
            self.requests[rid] = req
        return req

    def _chunk(self, req: Request, want, hit: int) -> int:
        computed = req.num_computed_tokens + hit
        remaining = req.num_tokens - computed
        budget = self.vc.scheduler_config.max_num_batched_tokens
        if want in (None, "auto"):
            n = min(remaining, budget)
        elif want == "rest":
            n = remaining
        else:
            n = int(want)
        if self.shim is not None and want in (None, "auto"):
            n = Scheduler._mamba_block_aligned_split(self.shim, req, n, hit, 0)
        return n

    def _after_compute(self, req: Request, n: int) -> None:
        req.num_computed_tokens += n
        if req.num_computed_tokens >= req.num_tokens:
            # update_from_output: the step that reaches the end samples a token.
            req.append_output_token_ids(sampled_token(req.request_id, req.num_tokens))
            req.is_prefill_chunk = False
        else:
            req.is_prefill_chunk = True

    def op_compute(self, rid: str, want=None) -> dict:
        req = self._get(rid)
        res: dict[str, Any] = {"op": "compute", "req": rid}
        if req.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED):
            blocks, hit, boundary = self.kv.get_computed_blocks(req)
            req.shared_prefix_boundary = boundary
            n = self._chunk(req, want, hit)
            res.update(hit_tokens=hit, num_new_tokens=n)
            if n <= 0:
                res["result"] = "SKIP(n=0)"
                return res
            new = self.kv.allocate_slots(
                req,
                n,
                num_new_computed_tokens=hit,
                new_computed_blocks=blocks,
                full_sequence_must_fit=self.reserve_full_isl,
                has_scheduled_reqs=bool(self.running),
            )
            if new is None:
                res["result"] = "FAIL"
                return res
            req.status = RequestStatus.RUNNING
            self.running.append(rid)
            req.num_computed_tokens = hit
        else:
            n = self._chunk(req, want, 0)
            res.update(num_new_tokens=n)
            if n <= 0:
                res["result"] = "SKIP(n=0)"
                return res
            new = self.kv.allocate_slots(req, n)
            if new is None:
                res["result"] = "FAIL"
                return res
        res["new_blocks"] = [len(g) for g in new.blocks]
        res["result"] = "OK"
        self._after_compute(req, n)
        res["num_computed_tokens"] = req.num_computed_tokens
        return res

    def op_free(self, rid: str) -> dict:
        req = self.requests[rid]
        self.kv.free(req)
        req.status = RequestStatus.FINISHED_STOPPED
        if rid in self.running:
            self.running.remove(rid)
        return {"op": "free", "req": rid, "result": "OK"}

    def op_preempt(self, rid: str) -> dict:
        # Scheduler._preempt_request: free blocks, reset progress.
        req = self.requests[rid]
        self.kv.free(req)
        req.status = RequestStatus.PREEMPTED
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        if rid in self.running:
            self.running.remove(rid)
        return {"op": "preempt", "req": rid, "result": "OK"}

    def snapshot(self) -> dict:
        pool = self.kv.block_pool
        per_req = {
            rid: request_block_counts(self.kv, rid)
            for rid in self.requests
            if not self.requests[rid].is_finished()
            and any(len(m.req_to_blocks.get(rid) or []) for m in self.kv.coordinator.single_type_managers)
        }
        return {
            "free_blocks": pool.get_num_free_blocks(),
            "cached_hashes": len(pool.cached_block_hash_to_block),
            "usage": round(pool.get_usage(), 6),
            "requests": per_req,
        }


def expand_steps(steps: list) -> list[list[dict]]:
    out: list[list[dict]] = []
    for step in steps:
        if isinstance(step, list):
            ops, repeat = step, 1
        elif "ops" in step:
            ops, repeat = step["ops"], int(step.get("repeat", 1))
        else:
            ops, repeat = [step], 1
        for _ in range(repeat):
            out.append(ops)
    return out


def run_manager_trace(model: dict, trace: dict, caching: bool) -> dict:
    plan = plan_kv_cache(model, caching)
    req_defs = trace["requests"]
    prompts = make_prompts(req_defs)
    max_tokens = {rid: int(d.get("max_tokens", 1 << 20)) for rid, d in req_defs.items()}
    drv = ManagerDriver(plan, prompts, max_tokens)
    steps_out = []
    for step_idx, ops in enumerate(expand_steps(trace["steps"])):
        drv.kv.new_step_starts()
        results = []
        for op in ops:
            kind = op["op"]
            if kind in ("compute", "prefill", "decode"):
                results.append(drv.op_compute(op["req"], op.get("tokens", "auto")))
            elif kind == "free":
                results.append(drv.op_free(op["req"]))
            elif kind == "preempt":
                results.append(drv.op_preempt(op["req"]))
            else:
                raise ValueError(f"unknown op {kind}")
        steps_out.append({"step": step_idx, "ops": results, **drv.snapshot()})
    return {"plan": plan_report(plan), "steps": steps_out}


def print_trace(out: dict) -> None:
    print_plan(out["plan"])
    print("-- trace (per step: ops, free blocks, per request [held,table_len] per group)")
    for s in out["steps"]:
        ops = []
        for r in s["ops"]:
            if r["op"] == "compute":
                extra = f" hit={r['hit_tokens']}" if "hit_tokens" in r else ""
                nb = f" new={r['new_blocks']}" if "new_blocks" in r else ""
                ops.append(f"{r['req']}:+{r.get('num_new_tokens')}{extra}{nb} {r['result']}")
            else:
                ops.append(f"{r['op']} {r['req']}")
        reqs = " ".join(f"{rid}={v}" for rid, v in s["requests"].items())
        print(f"step {s['step']:3d} | {'; '.join(ops)} | free={s['free_blocks']} cached={s['cached_hashes']} | {reqs}")


# ---------------------------------------------------------------------------
# Benchmark: synthetic continuous batching driving KVCacheManager directly
# ---------------------------------------------------------------------------
def run_bench(model: dict, args) -> dict:
    caching = args.caching == "on"
    plan = plan_kv_cache(model, caching)
    results = []
    for run in range(args.runs):
        rng = random.Random(args.seed)
        specs = []
        shared = [rng.randrange(1, VOCAB) for _ in range(args.shared_prefix_len)]
        for i in range(args.requests):
            plen = rng.randint(args.min_prompt, args.max_prompt)
            ndec = rng.randint(args.min_decode, args.max_decode)
            use_shared = args.shared_prefix_len and rng.random() < args.shared_fraction
            body_len = plen - (len(shared) if use_shared else 0)
            body = [rng.randrange(1, VOCAB) for _ in range(max(body_len, 1))]
            prompt = (shared + body)[: max(plen, 1)] if use_shared else body[:plen]
            specs.append((f"r{i}", prompt, ndec))
        kv = make_kv_manager(plan)
        hasher = make_block_hasher(plan)
        shim = mamba_split_shim(plan, kv)
        budget = plan.vllm_config.scheduler_config.max_num_batched_tokens
        waiting = list(range(len(specs)))
        waiting.reverse()
        running: list[Request] = []
        decode_left: dict[str, int] = {}
        calls = 0
        alloc_time = 0.0
        fails = 0
        preemptions = 0
        steps = 0
        t_start = time.perf_counter()
        perf = time.perf_counter
        while waiting or running:
            steps += 1
            kv.new_step_starts()
            token_budget = budget
            scheduled: list[tuple[Request, int]] = []
            idx = 0
            preempted_this_step = False
            while idx < len(running) and token_budget > 0:
                req = running[idx]
                n = min(req.num_tokens - req.num_computed_tokens, token_budget)
                if shim is not None:
                    n = Scheduler._mamba_block_aligned_split(shim, req, n)
                if n <= 0:
                    idx += 1
                    continue
                while True:
                    t0 = perf()
                    new = kv.allocate_slots(req, n)
                    alloc_time += perf() - t0
                    calls += 1
                    if new is not None:
                        break
                    fails += 1
                    victim = running.pop()
                    kv.free(victim)
                    victim.status = RequestStatus.PREEMPTED
                    victim.num_computed_tokens = 0
                    victim.num_preemptions += 1
                    preemptions += 1
                    preempted_this_step = True
                    waiting.append(int(victim.request_id[1:]))
                    if victim is req:
                        break
                if new is None:
                    break
                scheduled.append((req, n))
                token_budget -= n
                idx += 1
            while not preempted_this_step and waiting and token_budget > 0 and len(running) < args.max_running:
                i = waiting[-1]
                rid, prompt, ndec = specs[i]
                req = new_request(rid, prompt, ndec, hasher, float(i))
                blocks, hit, boundary = kv.get_computed_blocks(req)
                req.shared_prefix_boundary = boundary
                n = min(req.num_tokens - hit, token_budget)
                if shim is not None:
                    n = Scheduler._mamba_block_aligned_split(shim, req, n, hit, 0)
                    if n == 0:
                        break
                t0 = perf()
                new = kv.allocate_slots(
                    req,
                    n,
                    num_new_computed_tokens=hit,
                    new_computed_blocks=blocks,
                    full_sequence_must_fit=True,
                    has_scheduled_reqs=bool(running),
                )
                alloc_time += perf() - t0
                calls += 1
                if new is None:
                    fails += 1
                    break
                waiting.pop()
                req.status = RequestStatus.RUNNING
                req.num_computed_tokens = hit
                running.append(req)
                decode_left[rid] = ndec
                scheduled.append((req, n))
                token_budget -= n
            # "model step": advance computed tokens, sample, finish.
            finished = []
            for req, n in scheduled:
                req.num_computed_tokens += n
                if req.num_computed_tokens >= req.num_tokens:
                    rid = req.request_id
                    decode_left[rid] -= 1
                    if decode_left[rid] <= 0:
                        finished.append(req)
                    else:
                        req.append_output_token_ids(sampled_token(rid, req.num_tokens))
            for req in finished:
                kv.free(req)
                req.status = RequestStatus.FINISHED_STOPPED
                running.remove(req)
            if not scheduled and not finished and not running and waiting:
                raise RuntimeError("deadlock: cannot admit any request")
        wall = time.perf_counter() - t_start
        results.append(
            {
                "run": run,
                "allocate_slots_calls": calls,
                "alloc_fail": fails,
                "preemptions": preemptions,
                "steps": steps,
                "alloc_time_s": alloc_time,
                "wall_s": wall,
                "calls_per_s_alloc_only": calls / alloc_time if alloc_time else 0.0,
                "calls_per_s_wall": calls / wall if wall else 0.0,
                "final_free_blocks": kv.block_pool.get_num_free_blocks(),
            }
        )
        print(json.dumps(results[-1]), flush=True)
    med = lambda k: statistics.median(r[k] for r in results)  # noqa: E731
    summary = {
        "plan": {k: v for k, v in plan_report(plan).items() if k != "groups"},
        "num_groups": len(plan.sched_config.kv_cache_groups),
        "params": vars(args),
        "median_calls_per_s_alloc_only": med("calls_per_s_alloc_only"),
        "median_calls_per_s_wall": med("calls_per_s_wall"),
        "median_wall_s": med("wall_s"),
        "runs": results,
    }
    return summary


# ---------------------------------------------------------------------------
# Full Scheduler oracle (real vllm.v1.core.sched.scheduler.Scheduler)
# ---------------------------------------------------------------------------
def make_scheduler(plan: Plan) -> Scheduler:
    from vllm.v1.structured_output import StructuredOutputManager

    vc = plan.vllm_config
    return Scheduler(
        vllm_config=vc,
        kv_cache_config=plan.sched_config,
        structured_output_manager=StructuredOutputManager(vc),
        block_size=plan.scheduler_block_size,
        hash_block_size=plan.hash_block_size,
        log_stats=True,
    )


class FrontEnd:
    """vLLM's API-server side of a request's life, as far as the scheduler sees it:
    the real ``OutputProcessor`` follows every request from its admission to the
    output that finishes it, and the real ``AsyncLLM.check_admission`` applies
    ``max_num_queued_reqs`` / ``max_num_queued_tokens`` to each arrival."""

    def __init__(self, vllm_config: VllmConfig):
        from vllm.v1.engine.output_processor import OutputProcessor

        self.processor = OutputProcessor(tokenizer=None, log_stats=False)
        self.admission = SimpleNamespace(
            scheduler_config=vllm_config.scheduler_config,
            admission_stats=None,
            get_num_unfinished_requests=self.processor.get_num_unfinished_requests,
            get_num_queued_tokens=getattr(self.processor, "get_num_queued_tokens", None),
            _record_admission_rejection=lambda reason: None,
        )

    def admit(self, request) -> bool:
        """``AsyncLLM.check_admission`` for one arriving request; on success the processor tracks it.

        A release without ``check_admission`` (no ``max_num_queued_*``) admits every request.
        """
        from vllm.v1.engine.async_llm import AsyncLLM

        check = getattr(AsyncLLM, "check_admission", None)
        try:
            if check is not None:
                check(self.admission, 1, request.request_id)
        except Exception as exc:  # QueueOverflowError / MaxQueuedTokensError: HTTP 503
            if type(exc).__name__ in ("QueueOverflowError", "MaxQueuedTokensError"):
                return False
            raise
        self.processor.add_request(request, None)
        return True

    def outputs(self, engine_core_outputs: dict) -> None:
        for eco in engine_core_outputs.values():
            self.processor.process_outputs(eco.outputs)


def engine_core_request(rid: str, prompt: list[int], max_tokens: int, arrival: float, priority: int):
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine import EngineCoreRequest

    params = SamplingParams(max_tokens=max_tokens, output_kind=RequestOutputKind.DELTA, detokenize=False)
    return EngineCoreRequest(
        request_id=rid,
        prompt_token_ids=list(prompt),
        mm_features=None,
        sampling_params=params,
        pooling_params=None,
        arrival_time=arrival,
        lora_request=None,
        cache_salt=None,
        data_parallel_rank=None,
        priority=priority,
        external_req_id=rid,
    )


def run_scheduler_trace(model: dict, trace: dict, caching: bool) -> dict:
    """Drive the real Scheduler step by step: arrivals through the front end
    (admission), one ``schedule()`` per step, a fake model runner that samples
    one token per request whose computed tokens reach its length, and the
    outputs back through ``update_from_output`` and the front end."""
    from vllm.v1.outputs import ModelRunnerOutput

    plan = plan_kv_cache(model, caching)
    sched = make_scheduler(plan)
    front = FrontEnd(plan.vllm_config)
    hasher = make_block_hasher(plan)
    req_defs = trace["requests"]
    prompts = make_prompts(req_defs)
    arrivals: dict[int, list[str]] = {}
    for rid, d in req_defs.items():
        arrivals.setdefault(int(d.get("arrival_step", 0)), []).append(rid)
    max_steps = int(trace.get("max_steps", 10_000))
    reqs: dict[str, Request] = {}
    seen = 0
    steps = []
    for step in range(max_steps):
        rejected = []
        for rid in arrivals.get(step, []):
            d = req_defs[rid]
            ecr = engine_core_request(
                rid, prompts[rid], int(d.get("max_tokens", 16)), float(seen), int(d.get("priority", 0))
            )
            seen += 1
            if not front.admit(ecr):
                rejected.append(rid)
                continue
            req = Request.from_engine_core_request(ecr, hasher)
            reqs[rid] = req
            sched.add_request(req)
        if not sched.has_requests() and step > max(arrivals):
            break
        out = sched.schedule()
        # Fake model runner: every request whose computed tokens reach its
        # token count after this step samples one token.
        req_ids = list(out.num_scheduled_tokens)
        sampled = []
        for rid in req_ids:
            req = reqs[rid]
            done_after = req.num_computed_tokens  # already advanced by schedule()
            if done_after >= req.num_tokens:
                sampled.append([sampled_token(rid, req.num_tokens)])
            else:
                sampled.append([])
        mro = ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={rid: i for i, rid in enumerate(req_ids)},
            sampled_token_ids=sampled,
        )
        front.outputs(sched.update_from_output(out, mro))
        kv = sched.kv_cache_manager
        steps.append(
            {
                "step": step,
                "scheduled": dict(out.num_scheduled_tokens),
                "total_tokens": out.total_num_scheduled_tokens,
                "preempted": sorted(getattr(out, "preempted_req_ids", None) or []),
                "finished": sorted(out.finished_req_ids),
                "rejected": rejected,
                "free_blocks": kv.block_pool.get_num_free_blocks(),
                "running": [r.request_id for r in sched.running],
                "waiting": len(sched.waiting),
                "blocks": {r.request_id: request_block_counts(kv, r.request_id) for r in sched.running},
            }
        )
    return {"plan": plan_report(plan), "steps": steps}


def print_sched(out: dict) -> None:
    print_plan(out["plan"])
    print("-- scheduler steps")
    for s in out["steps"]:
        sch = " ".join(f"{k}:{v}" for k, v in s["scheduled"].items())
        extra = ""
        if s["preempted"]:
            extra += f" PREEMPTED={s['preempted']}"
        if s["finished"]:
            extra += f" finished={s['finished']}"
        blocks = " ".join(f"{k}={v}" for k, v in s["blocks"].items())
        print(
            f"step {s['step']:3d} | {sch} (total {s['total_tokens']}){extra} | "
            f"free={s['free_blocks']} waiting={s['waiting']} | {blocks}"
        )


# ---------------------------------------------------------------------------
def _load(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _modes(arg: str) -> list[bool]:
    return {"off": [False], "on": [True], "both": [False, True]}[arg]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log-level", default=None)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("config", help="KV cache groups / num_blocks / concurrency")
    p.add_argument("model")
    p.add_argument("--caching", choices=["off", "on", "both"], default="both")
    p.add_argument("--json", action="store_true")
    p.add_argument("--layers", action="store_true", help="list layer names per group")
    p = sub.add_parser("specs", help="per-entry page size / reservation formulas")
    p.add_argument("model")
    p.add_argument("--caching", choices=["off", "on", "both"], default="both")
    p = sub.add_parser("trace", help="drive KVCacheManager with a JSON trace")
    p.add_argument("model")
    p.add_argument("trace")
    p.add_argument("--caching", choices=["off", "on", "both"], default="both")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("sched", help="drive the real Scheduler")
    p.add_argument("model")
    p.add_argument("trace")
    p.add_argument("--caching", choices=["off", "on", "both"], default="both")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("bench", help="allocate_slots throughput")
    p.add_argument("model")
    p.add_argument("--caching", choices=["off", "on"], default="on")
    p.add_argument("--requests", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--min-prompt", type=int, default=1)
    p.add_argument("--max-prompt", type=int, default=8192)
    p.add_argument("--min-decode", type=int, default=100)
    p.add_argument("--max-decode", type=int, default=500)
    p.add_argument("--max-running", type=int, default=256)
    p.add_argument("--shared-prefix-len", type=int, default=0)
    p.add_argument("--shared-fraction", type=float, default=0.5)
    p.add_argument("--json-out", default=None)
    args = ap.parse_args()

    model = _load(args.model)
    if args.cmd == "config":
        reps = [plan_report(plan_kv_cache(model, m)) for m in _modes(args.caching)]
        if args.json:
            print(json.dumps(reps, indent=1, default=str))
        else:
            for rep in reps:
                print_plan(rep, show_layers=args.layers)
    elif args.cmd == "specs":
        for m in _modes(args.caching):
            print(
                json.dumps(
                    {
                        "enable_prefix_caching": m,
                        "max_model_len": model["max_model_len"],
                        "specs": spec_table(model, m),
                    },
                    indent=1,
                    default=str,
                )
            )
    elif args.cmd == "trace":
        trace = _load(args.trace)
        model = _merge(model, trace.get("model_overrides", {}))
        outs = [run_manager_trace(model, trace, m) for m in _modes(args.caching)]
        if args.json:
            print(json.dumps(outs, indent=1, default=str))
        else:
            for out in outs:
                print_trace(out)
    elif args.cmd == "sched":
        trace = _load(args.trace)
        model = _merge(model, trace.get("model_overrides", {}))
        outs = [run_scheduler_trace(model, trace, m) for m in _modes(args.caching)]
        if args.json:
            print(json.dumps(outs, indent=1, default=str))
        else:
            for out in outs:
                print_sched(out)
    elif args.cmd == "bench":
        summary = run_bench(model, args)
        text = json.dumps(summary, indent=1, default=str)
        if args.json_out:
            Path(args.json_out).write_text(text)
        print(
            json.dumps(
                {
                    k: summary[k]
                    for k in ("num_groups", "median_calls_per_s_alloc_only", "median_calls_per_s_wall", "median_wall_s")
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

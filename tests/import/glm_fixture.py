"""The GLM-5.3-Flash TP 4 evidence folder of 02 §11, built in memory.

Every number is the contract of 02 §11 (and 03 §7): pool page 13,516,800,
13,697 blocks, 2,176-token blocks, concurrency 27.67070707070707.  The real
vLLM 0.33.0 planning code gives the same numbers for these specs
(``data/oracle_glm53flash_tp4.expected.json``).

:class:`Evidence` holds the index launch, the two launch manifests and the
records as plain dicts; :meth:`Evidence.write` writes the folder and
recomputes every SHA-256 of the index, so a test edits the dicts (or puts raw
bytes in :attr:`Evidence.raw`) and writes.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

CONFIG = "glm53flash-tp4"
ATTEMPT = "gb300-tp4-col-43ca7402"
PHASES = ("prefill", "decode")
TP = 4
MOD = "vllm.v1.kv_cache_interface."
UNIFORM = MOD + "UniformTypeKVCacheSpecs"

B = 2176
L = 1048576
N_BLOCKS = 13697
POOL_PAGE = 13516800
ALLOCATED = N_BLOCKS * POOL_PAGE  # 185,139,609,600
AVAILABLE = 185139610600
CONCURRENCY = 27.67070707070707
SIZE_TOKENS = 29014839
KDA_PAGE = 1114112
INDEXER_PAGE = 71808
LATENT_PAGE = 1114112
RING_PAGE = 2048
LATENT_OFFSET = 789888
REVISION = "04c4e9e95c5da8862dced7e5056455116f83a7e0"
IMAGE = "vllm/vllm-openai@sha256:" + "a" * 64
#: The staged model configuration (02 §2.2 ``launch.model_config``; I-114 reads it, I-34 compares its hash).
MODEL_CONFIG = b'{"architectures": ["Glm5NextForConditionalGeneration"], "model_type": "glm5_next"}\n'
MODEL_CONFIG_SHA256 = hashlib.sha256(MODEL_CONFIG).hexdigest()

KDA_LAYERS = [i for i in range(45) if i % 4 != 3]
MLA_LAYERS = [i for i in range(45) if i % 4 == 3]


def kda(i: int) -> str:
    return f"language_model.model.layers.{i}.self_attn"


def latent(i: int) -> str:
    return f"language_model.model.layers.{i}.self_attn.attn"


def indexer(i: int) -> str:
    return f"language_model.model.layers.{i}.self_attn.indexer.k_cache"


def ring(i: int) -> str:
    return f"language_model.model.layers.{i}.self_attn.indexer.tail_cache"


def kda_groups() -> list[list[int]]:
    """vLLM assigns the 34 KDA layers round-robin to 4 groups (02 §11.1)."""
    groups: list[list[int]] = [[], [], [], []]
    for pos, i in enumerate(KDA_LAYERS):
        groups[pos % 4].append(i)
    return groups


def launch() -> dict[str, Any]:
    return {
        "identity": {
            "model": "zai-org/GLM-5.3-Flash",
            "model_revision": REVISION,
            "architecture": "Glm5NextForConditionalGeneration",
            "num_experts": 288,
            "framework": "vllm",
            "framework_version": "0.33.0",
            "gpu": "gb300",
            "sm": 103,
        },
        "topology": {"tp": 4, "pp": 1, "dp": 1, "moe_tp": 4, "moe_ep": 1, "cp": 1},
        "precision": {
            "gemm_quant_mode": "fp8_block",
            "moe_quant_mode": "fp8_block",
            "fmha_quant_mode": "fp8",
            "kvcache_quant_mode": "fp8",
            "comm_quant_mode": "half",
            "moe_backend": "auto",
            "attention_backend": "auto",
            "enable_wideep": False,
            "enable_eplb": False,
        },
        "collection": {
            "max_model_len": L,
            "max_num_batched_tokens": 8192,
            "max_num_seqs": 256,
            "gpu_memory_utilization": 0.9,
            "async_scheduling": False,
            "enforce_eager": False,
            "cudagraph_mode": "FULL_AND_PIECEWISE",
            "cudagraph_capture_sizes": [1, 2, 4, 8, 16, 32, 64, 128, 256],
            "warmup_iterations": 0,
            "mamba_cache_mode_override": None,
        },
        "model_config": {"path": "model-config.json", "sha256": MODEL_CONFIG_SHA256},
        "deployment": {"executor": "slurm", "image": IMAGE},
    }


def settings(kind: str) -> dict[str, Any]:
    return {
        "model": {"max_model_len": L, "dtype": "torch.bfloat16"},
        "cache": {
            "block_size": B,
            "gpu_memory_utilization": 0.9,
            "enable_prefix_caching": True,
            "mamba_cache_mode": "align",
            "mamba_block_size": B if kind == "worker" else 16,
            "prefix_match_unit": None,
            "hash_block_size": B,
            "kv_cache_dtype": "fp8",
            "kv_cache_layout": "BLHNC",
            "num_gpu_blocks_override": None,
            "kv_cache_memory_bytes": None,
            "cpu_offload_gb": 0,
            "prefix_cache_retention_interval": 0,
        },
        "scheduler": {
            "max_num_batched_tokens": 8192,
            "max_num_seqs": 256,
            "async_scheduling": False,
            "enable_chunked_prefill": True,
            "max_in_flight_tokens": 8192,
        },
        "parallel": {
            "tensor_parallel_size": 4,
            "pipeline_parallel_size": 1,
            "data_parallel_size": 1,
            "decode_context_parallel_size": 1,
            "prefill_context_parallel_size": 1,
            "enable_expert_parallel": False,
            "enable_eplb": False,
        },
        "compilation": {
            "mode": "VLLM_COMPILE",
            "cudagraph_mode": "FULL_AND_PIECEWISE",
            "cudagraph_capture_sizes": [1, 2, 4, 8, 16, 32, 64, 128, 256],
            "max_cudagraph_capture_size": 256,
            "enforce_eager": False,
        },
        "model_runner": "v2",
        "speculative": None,
        "kv_transfer": None,
    }


# -- layer specs (02 §11.2: every dataclass field of the vLLM 0.33.0 spec) --


def kda_spec() -> dict[str, Any]:
    return {
        "class": MOD + "MambaSpec",
        "block_size": B,
        "page_size_bytes": KDA_PAGE,
        "fields": {
            "block_size": B,
            "dcp_sharded": False,
            "block_stride_alignment": None,
            "is_draft": False,
            "shapes": [[6144, 3], [16, 128, 128]],
            "dtypes": ["torch.bfloat16", "torch.float32"],
            "page_size_padded": KDA_PAGE,
            "mamba_type": "GDN_ATTN",
            "mamba_cache_mode": "align",
            "num_speculative_blocks": 0,
            "num_prefill_checkpoint_blocks": 1,
            "prefill_checkpoint_alignment": 16,
            "num_heads": 1,
            "tokens_per_state": -1,
            "tp_replicated": False,
        },
    }


def _mla_fields(head_size: int) -> dict[str, Any]:
    return {
        "block_size": B,
        "dcp_sharded": True,
        "block_stride_alignment": None,
        "is_draft": False,
        "max_tp_shards": 1,
        "num_kv_heads": 1,
        "head_size": head_size,
        "dtype": "torch.uint8",
        "head_size_v": 0,
        "kv_quant_mode": "NONE",
        "page_size_padded": None,
        "num_head_slots": None,
        "state_content_bytes": None,
        "tokens_per_state": 1,
        "sliding_window": None,
        "attention_chunk_size": None,
        "non_causal": False,
        "cache_dtype_str": None,
        "topk_buffer_width": None,
        "alignment": None,
        "model_version": None,
        "cache_role": "SPARSE",
        "is_index_group_leader": False,
        "non_causal_multi_token_decode": False,
    }


def indexer_spec() -> dict[str, Any]:
    fields = _mla_fields(132)
    fields.update(cache_role="INDEXER", tokens_per_state=4, block_stride_alignment={"multiple_of": 128})
    return {"class": MOD + "MLAAttentionSpec", "block_size": B, "page_size_bytes": INDEXER_PAGE, "fields": fields}


def latent_spec() -> dict[str, Any]:
    fields = _mla_fields(512)
    fields.update(
        cache_dtype_str="fp8",
        kv_quant_mode="FP8_PER_TENSOR",
        is_index_group_leader=True,
        block_stride_alignment={"multiple_of": 32},
    )
    return {"class": MOD + "MLAAttentionSpec", "block_size": B, "page_size_bytes": LATENT_PAGE, "fields": fields}


def ring_spec() -> dict[str, Any]:
    return {
        "class": MOD + "CircularBufferSpec",
        "block_size": 4,
        "page_size_bytes": RING_PAGE,
        "fields": {
            "block_size": 4,
            "dcp_sharded": False,
            "block_stride_alignment": None,
            "is_draft": False,
            "max_tp_shards": None,
            "num_kv_heads": 2,
            "head_size": 128,
            "dtype": "torch.bfloat16",
            "head_size_v": 0,
            "kv_quant_mode": "NONE",
            "page_size_padded": None,
            "num_head_slots": None,
            "state_content_bytes": None,
            "tokens_per_state": 1,
        },
    }


def _group(
    gid: int,
    kind: str,
    layers: list[str],
    spec_of,
    block: int,
    startup: int,
    cacheable: bool,
    state: dict[str, Any] | None,
) -> dict[str, Any]:
    specs = {name: spec_of(name) for name in layers}
    g: dict[str, Any] = {
        "group_id": gid,
        "spec_class": UNIFORM,
        "kind": kind,
        "layer_names": layers,
        "block_size_tokens": block,
        "page_size_bytes": sum(s["page_size_bytes"] for s in specs.values()),
        "sliding_window": None,
        "prefix_cacheable": cacheable,
        "host_resident": False,
        "role": "default",
        "startup_blocks_per_request": startup,
    }
    if state is not None:
        g["state"] = state
    g["layer_specs"] = specs
    return g


def worker_groups() -> list[dict[str, Any]]:
    mamba_state = {
        "blocks_per_request": 1,
        "num_speculative_blocks": 0,
        "num_prefill_checkpoint_blocks": 1,
        "prefill_checkpoint_alignment": 16,
        "mamba_cache_mode": "align",
    }
    groups = [
        _group(g, "state", [kda(i) for i in idx], lambda _n: kda_spec(), B, 3, True, dict(mamba_state))
        for g, idx in enumerate(kda_groups())
    ]
    g4_layers = [name for i in MLA_LAYERS for name in (indexer(i), latent(i))]
    groups.append(
        _group(
            4,
            "attention",
            g4_layers,
            lambda n: indexer_spec() if n.endswith("k_cache") else latent_spec(),
            B,
            482,
            True,
            None,
        )
    )
    groups.append(
        _group(
            5, "state", [ring(i) for i in MLA_LAYERS], lambda _n: ring_spec(), 4, 1, False, {"blocks_per_request": 1}
        )
    )
    return groups


def scheduler_groups(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The engine core's copy: a uniform group carries its first layer's spec (02 §3.11)."""
    out = []
    for g in groups:
        first = g["layer_specs"][g["layer_names"][0]]
        out.append(
            {
                "group_id": g["group_id"],
                "layer_names": list(g["layer_names"]),
                "spec_class": first["class"],
                "block_size_tokens": first["block_size"],
                "page_size_bytes": first["page_size_bytes"],
                "sliding_window": None,
                "prefix_cacheable": g["prefix_cacheable"],
                "host_resident": False,
                "role": "default",
                "startup_blocks_per_request": g["startup_blocks_per_request"],
                "spec_fields": copy.deepcopy(first["fields"]),
            }
        )
    return out


def _views(rank: int) -> dict[str, list[dict[str, Any]]]:
    sid = "s0"
    views: dict[str, list[dict[str, Any]]] = {}
    for group in kda_groups():
        for pos, i in enumerate(group):
            start = pos * KDA_PAGE
            views[kda(i)] = [
                {
                    "storage_id": sid,
                    "storage_offset_bytes": start,
                    "dtype": "torch.bfloat16",
                    "shape": [N_BLOCKS, 6144, 3],
                    "stride_bytes": [POOL_PAGE, 6, 2],
                    "element_size_bytes": 2,
                    "block_axis": 0,
                    "kernel_block_size_tokens": B,
                    "kernel_block_stride": 0,
                },
                {
                    "storage_id": sid,
                    "storage_offset_bytes": start + 36864,
                    "dtype": "torch.float32",
                    "shape": [N_BLOCKS, 16, 128, 128],
                    "stride_bytes": [POOL_PAGE, 65536, 512, 4],
                    "element_size_bytes": 4,
                    "block_axis": 0,
                    "kernel_block_size_tokens": B,
                    "kernel_block_stride": 0,
                },
            ]
    for pos, i in enumerate(MLA_LAYERS):
        views[indexer(i)] = [
            {
                "storage_id": sid,
                "storage_offset_bytes": pos * INDEXER_PAGE,
                "dtype": "torch.uint8",
                "shape": [43827217, 32, 132],
                "stride_bytes": [4224, 132, 1],
                "element_size_bytes": 1,
                "block_axis": 0,
                "kernel_block_size_tokens": 128,
                "kernel_block_stride": 3200,
            }
        ]
        views[latent(i)] = [
            {
                "storage_id": sid,
                "storage_offset_bytes": LATENT_OFFSET + pos * LATENT_PAGE,
                "dtype": "torch.uint8",
                "shape": [N_BLOCKS, B, 512],
                "stride_bytes": [POOL_PAGE, 512, 1],
                "element_size_bytes": 1,
                "block_axis": 0,
                "kernel_block_size_tokens": B,
                "kernel_block_stride": 0,
            }
        ]
        views[ring(i)] = [
            {
                "storage_id": sid,
                "storage_offset_bytes": pos * RING_PAGE,
                "dtype": "torch.bfloat16",
                "shape": [N_BLOCKS, 2, 4, 128],
                "stride_bytes": [POOL_PAGE, 1024, 256, 2],
                "element_size_bytes": 2,
                "block_axis": 0,
                "kernel_block_size_tokens": 4,
                "kernel_block_stride": 0,
            }
        ]
    return views


def worker_cache(rank: int) -> dict[str, Any]:
    groups = worker_groups()

    def alloc(layers: list[str], stride: int, offset: int) -> dict[str, Any]:
        return {
            "storage_id": "s0",
            "size": ALLOCATED,
            "layers": layers,
            "layer_stride": stride,
            "block_stride": POOL_PAGE,
            "offset": offset,
        }

    allocations = [alloc(list(g["layer_names"]), KDA_PAGE, 0) for g in groups[:4]]
    allocations.append(alloc([indexer(i) for i in MLA_LAYERS], INDEXER_PAGE, 0))
    allocations.append(alloc([latent(i) for i in MLA_LAYERS], LATENT_PAGE, LATENT_OFFSET))
    allocations.append(alloc([ring(i) for i in MLA_LAYERS], RING_PAGE, 0))
    attention_groups = [
        {
            "kv_cache_group_id": g,
            "backend": "FLASH_KDA",
            "layer_names": list(groups[g]["layer_names"]),
            "kernel_block_size": None,
            "kernel_block_stride": 0,
        }
        for g in range(4)
    ]
    attention_groups += [
        {
            "kv_cache_group_id": 4,
            "backend": "FLASHMLA_SPARSE_INDEXER",
            "layer_names": [indexer(i) for i in MLA_LAYERS],
            "kernel_block_size": 128,
            "kernel_block_stride": 3200,
        },
        {
            "kv_cache_group_id": 4,
            "backend": "FLASHMLA_SPARSE",
            "layer_names": [latent(i) for i in MLA_LAYERS],
            "kernel_block_size": None,
            "kernel_block_stride": 0,
        },
        {
            "kv_cache_group_id": 5,
            "backend": "CIRCULAR_BUFFER",
            "layer_names": [ring(i) for i in MLA_LAYERS],
            "kernel_block_size": None,
            "kernel_block_stride": 0,
        },
    ]
    return {
        "num_blocks": N_BLOCKS,
        "available_cache_bytes": AVAILABLE,
        "allocated_cache_bytes": ALLOCATED,
        "kv_cache_layout": "BLHNC",
        "storages": [
            {"storage_id": "s0", "device": f"cuda:{rank}", "pointer": 140000000000000 + rank, "size_bytes": ALLOCATED}
        ],
        "allocations": allocations,
        "groups": groups,
        "layer_views": _views(rank),
        "attention_groups": attention_groups,
        "model_runner": {
            "class": "vllm.v1.worker.gpu.model_runner.GPUModelRunner",
            "version": "v2",
            "kernel_block_sizes": [B, B, B, B, B, 4],
        },
        "placement": "shared_pool",
    }


def scheduler_cache() -> dict[str, Any]:
    return {
        "num_blocks": N_BLOCKS,
        "free_blocks": N_BLOCKS - 1,
        "null_block_id": 0,
        "reserved_block_ids": [0],
        "watermark_blocks": 0,
        "pool_count": 1,
        "block_size": B,
        "hash_block_size": B,
        "cache_hit_alignment_tokens": B,
        "mamba_cache_mode": "align",
        "groups": scheduler_groups(worker_groups()),
        "startup": {
            "max_model_len": L,
            "max_in_flight_tokens": 8192,
            "kv_cache_max_concurrency": CONCURRENCY,
            "kv_cache_size_tokens": SIZE_TOKENS,
        },
    }


def record(phase: str, kind: str, tp: int | None) -> dict[str, Any]:
    rank = {"dp": 0, "tp": tp, "pp": 0} if kind == "worker" else {"dp": 0, "tp": None, "pp": None}
    rec: dict[str, Any] = {
        "schema_version": "fpmcore-runtime-observation/v1",
        "binding": {"configuration": CONFIG, "phase": phase, "attempt_id": ATTEMPT, "kind": kind, "rank": rank},
        "runtime": {
            "framework": "vllm",
            "version": "0.33.0",
            "source_revision": "4ba787ec" + "0" * 32,
            "source_files": {"vllm/v1/kv_cache_interface.py": "b" * 64},
            "image": IMAGE,
        },
        "observer": {"plugin": "fpmcore-vllm033", "version": "1.0.0", "source_sha256": "c" * 64},
        "launch": launch(),
        "model": {
            "path": "zai-org/GLM-5.3-Flash",
            "revision": REVISION,
            "config_sha256": MODEL_CONFIG_SHA256,
            "loaded_config_commit": REVISION,
        },
        "settings": settings(kind),
        "prefix_caching": {"enable_prefix_caching": True, "mamba_cache_mode": "align", "hash_block_size": B},
    }
    if kind == "worker":
        rec["lifecycle"] = {
            "measurement": "after_warmup",
            "cache_initialized": True,
            "warmup_completed": True,
            "capture_completed": True,
        }
        rec["hardware"] = {"gpu": "gb300", "sm": 103, "device_name": "NVIDIA GB300", "total_memory_bytes": 288000000000}
        rec["cache"] = worker_cache(tp or 0)
    else:
        rec["lifecycle"] = {"measurement": "scheduler_initialized", "cache_initialized": True}
        rec["cache"] = scheduler_cache()
    rec["unresolved_fields"] = []
    rec["error"] = None
    return rec


def worker_name(tp: int, dp: int = 0) -> str:
    return f"runtime-observation-worker-dp{dp}-tp{tp}-pp0.json"


def scheduler_name(dp: int = 0) -> str:
    return f"runtime-observation-scheduler-dp{dp}.json"


class Evidence:
    """A mutable evidence folder: edit the dicts, then :meth:`write`."""

    def __init__(self) -> None:
        self.config = CONFIG
        self.attempt = ATTEMPT
        self.launch = launch()
        self.manifests = {
            phase: {
                "schema_version": "fpmcore-runtime-probe-launch/v1",
                "attempt_id": ATTEMPT,
                "configuration": CONFIG,
                "phase": phase,
                "launch": launch(),
                "expected_ranks": {
                    "workers": [{"dp_rank": 0, "tp_rank": t, "pp_rank": 0} for t in range(TP)],
                    "schedulers": [{"dp_rank": 0}],
                },
            }
            for phase in PHASES
        }
        #: phase -> file name -> record
        self.records: dict[str, dict[str, dict[str, Any]]] = {
            phase: {
                **{worker_name(t): record(phase, "worker", t) for t in range(TP)},
                scheduler_name(): record(phase, "scheduler", None),
            }
            for phase in PHASES
        }
        #: relative path -> raw bytes written instead of the dict (strict-JSON cases)
        self.raw: dict[str, bytes] = {}
        #: extra artifacts of other kinds: relative path -> bytes
        self.other: dict[str, bytes] = {}

    # -- selection helpers ------------------------------------------------

    def workers(self, phase: str = "prefill") -> list[dict[str, Any]]:
        return [r for n, r in sorted(self.records[phase].items()) if "worker" in n]

    def scheduler(self, phase: str = "prefill") -> dict[str, Any]:
        return self.records[phase][scheduler_name()]

    def phase_records(self, phase: str = "prefill") -> list[dict[str, Any]]:
        return list(self.records[phase].values())

    def all_records(self) -> list[dict[str, Any]]:
        return [r for p in PHASES for r in self.records[p].values()]

    def edit_launch(self, fn) -> None:
        """Apply ``fn(launch)`` to the index's launch, the manifests' and every record's."""
        fn(self.launch)
        for m in self.manifests.values():
            fn(m["launch"])
        for r in self.all_records():
            fn(r["launch"])

    @staticmethod
    def path(phase: str, name: str) -> str:
        return f"{ATTEMPT}/{phase}/{name}"

    # -- writing ----------------------------------------------------------

    def index(self, hashes: dict[str, str]) -> dict[str, Any]:
        phases = {}
        for phase in PHASES:
            man = self.path(phase, "launch-manifest.json")
            arts = [
                {"path": self.path(phase, n), "sha256": hashes[self.path(phase, n)], "kind": "observation"}
                for n in sorted(self.records[phase])
            ]
            arts += [
                {"path": p, "sha256": hashes[p], "kind": "engine-log"}
                for p in sorted(self.other)
                if p.startswith(f"{ATTEMPT}/{phase}/")
            ]
            phases[phase] = {"launch_manifest": {"path": man, "sha256": hashes[man]}, "artifacts": arts}
        return {
            "schema_version": "fpmcore-runtime-observations/v1",
            "configurations": {
                self.config: {
                    "launch": self.launch,
                    "active_attempt_id": self.attempt,
                    "attempts": [{"attempt_id": self.attempt, "phases": phases}],
                }
            },
        }

    def files(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {"model-config.json": MODEL_CONFIG}  # staged, not listed in the index
        for phase in PHASES:
            out[self.path(phase, "launch-manifest.json")] = dumps(self.manifests[phase])
            for name, rec in self.records[phase].items():
                out[self.path(phase, name)] = dumps(rec)
        out.update(self.other)
        out.update(self.raw)
        return out

    def write(self, folder: Path, index: dict[str, Any] | None = None) -> Path:
        folder = Path(folder)
        files = self.files()
        hashes = {p: hashlib.sha256(b).hexdigest() for p, b in files.items()}
        for p, b in files.items():
            target = folder / p
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(b)
        (folder / "observations.json").write_bytes(dumps(index if index is not None else self.index(hashes)))
        return folder


def dumps(value: Any) -> bytes:
    return (json.dumps(value, indent=1, allow_nan=False) + "\n").encode("utf-8")

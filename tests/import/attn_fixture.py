"""Evidence of plain attention models: full-attention and sliding-window groups.

``AttnEvidence(groups=[("FullAttentionSpec", 12, None), ("SlidingWindowSpec", 12, 128)], ...)``
builds the records vLLM would give for that layout (the third value is the
sliding window, or a ``ChunkedLocalAttentionSpec`` group's attention chunk):

* ``hybrid=True``: a vLLM 0.33.0 record with hybrid evidence (02 §3), a
  block-outer (``BLHNC``) or layer-outer (``LBHNC``) pool;
* ``hybrid=False``: a record as the ``vllm_027`` plugin writes it (02 §3.14):
  no hybrid evidence, the ⁰ settings ``null``, one whole allocation per layer
  slot shared by the groups.

The startup numbers are computed with 03's formulas from the inputs; the tests
compare them with the vectors of 03 §10.
"""

from __future__ import annotations

import math
from typing import Any

import fpm_import_glm_fixture as G

MOD = G.MOD


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class AttnEvidence(G.Evidence):
    def __init__(
        self,
        groups=(("FullAttentionSpec", 4, None),),
        *,
        block=16,
        max_model_len=32768,
        num_blocks=1000,
        heads=8,
        head=128,
        tp=1,
        layout="BLHNC",
        version="0.33.0",
        hybrid=True,
        batched=8192,
        config="plain-tp1",
        attempt=G.ATTEMPT,
    ) -> None:
        self.config = config
        self.attempt = attempt
        self.B, self.L, self.n, self.tp = block, max_model_len, num_blocks, tp
        self.heads, self.head, self.layout, self.version, self.hybrid, self.T = (
            heads,
            head,
            layout,
            version,
            hybrid,
            batched,
        )
        self.page = 2 * block * heads * head * 2
        names = []
        i = 0
        self.group_layers: list[list[str]] = []
        for _cls, count, _w in groups:
            layers = [f"model.layers.{i + j}.self_attn.attn" for j in range(count)]
            i += count
            self.group_layers.append(layers)
            names += layers
        self.groups = list(groups)
        if hybrid:
            if layout in ("LBHNC", "LBNHC"):
                self.P = sum(self.page for _ in self.group_layers[0])
            else:
                self.P = max(len(ls) * self.page for ls in self.group_layers)
        else:
            self.P = max(len(ls) for ls in self.group_layers) * self.page
        self.launch = self._launch()
        self.manifests = {
            phase: {
                "schema_version": "fpmcore-runtime-probe-launch/v1",
                "attempt_id": attempt,
                "configuration": config,
                "phase": phase,
                "launch": self._launch(),
                "expected_ranks": {
                    "workers": [{"dp_rank": 0, "tp_rank": t, "pp_rank": 0} for t in range(tp)],
                    "schedulers": [{"dp_rank": 0}],
                },
            }
            for phase in G.PHASES
        }
        self.records = {
            phase: {
                **{G.worker_name(t): self._record(phase, "worker", t) for t in range(tp)},
                G.scheduler_name(): self._record(phase, "scheduler", None),
            }
            for phase in G.PHASES
        }
        self.raw = {}
        self.other = {}

    # -- derived numbers (03) ---------------------------------------------------

    def startup(self, cls: str, window: int | None) -> int:
        if cls == "FullAttentionSpec":
            return cdiv(self.L, self.B)
        if cls == "ChunkedLocalAttentionSpec":
            return cdiv(min(window + self.T, self.L), self.B)
        return cdiv(min(window - 1 + self.T, self.L), self.B) + 1

    @property
    def blocks_per_request(self) -> list[int]:
        return [self.startup(c, w) for c, _n, w in self.groups]

    @property
    def concurrency(self) -> float:
        return self.n / sum(self.blocks_per_request)

    @property
    def size_tokens(self) -> int:
        return int(self.concurrency * self.L)

    @property
    def scheduler_block(self) -> int:
        return self.B if len(self.groups) == 1 else math.lcm(*[self.B for _ in self.groups])

    # -- records -------------------------------------------------------------------

    def _launch(self) -> dict[str, Any]:
        launch = G.launch()
        launch["identity"].update(
            model="example/plain-model", architecture="LlamaForCausalLM", num_experts=0, framework_version=self.version
        )
        launch["topology"] = {"tp": self.tp, "pp": 1, "dp": 1, "moe_tp": 1, "moe_ep": 1, "cp": 1}
        launch["precision"].update(
            gemm_quant_mode="bfloat16",
            moe_quant_mode="bfloat16",
            fmha_quant_mode="bfloat16",
            kvcache_quant_mode="bfloat16",
        )
        launch["collection"].update(max_model_len=self.L, max_num_batched_tokens=self.T)
        return launch

    def _fields(self, cls: str, window: int | None) -> dict[str, Any]:
        f = {
            "block_size": self.B,
            "dcp_sharded": True,
            "block_stride_alignment": None,
            "is_draft": False,
            "max_tp_shards": None,
            "num_kv_heads": self.heads,
            "head_size": self.head,
            "dtype": "torch.bfloat16",
            "head_size_v": None,
            "kv_quant_mode": "NONE",
            "page_size_padded": None,
            "num_head_slots": None,
            "state_content_bytes": None,
            "tokens_per_state": 1,
        }
        if cls == "FullAttentionSpec":
            f.update(sliding_window=None, attention_chunk_size=None, non_causal=False)
        elif cls == "ChunkedLocalAttentionSpec":
            f.update(attention_chunk_size=window)
        else:
            f.update(sliding_window=window, extra_retained_tokens=0)
        return f

    def _spec(self, cls: str, window: int | None) -> dict[str, Any]:
        return {
            "class": MOD + cls,
            "block_size": self.B,
            "page_size_bytes": self.page,
            "fields": self._fields(cls, window),
        }

    def _settings(self, kind: str) -> dict[str, Any]:
        s = G.settings(kind)
        s["model"]["max_model_len"] = self.L
        s["cache"].update(
            block_size=self.B,
            mamba_cache_mode="none",
            mamba_block_size=None,
            hash_block_size=self.scheduler_block,
            kv_cache_dtype="auto",
            kv_cache_layout=self.layout,
        )
        s["scheduler"].update(max_num_batched_tokens=self.T, max_in_flight_tokens=self.T)
        s["parallel"]["tensor_parallel_size"] = self.tp
        if not self.hybrid:
            for key in (
                "mamba_cache_mode",
                "mamba_block_size",
                "prefix_match_unit",
                "hash_block_size",
                "kv_cache_layout",
                "prefix_cache_retention_interval",
            ):
                s["cache"][key] = None
            s["scheduler"]["max_in_flight_tokens"] = None
            s["model_runner"] = None
        return s

    def _worker_groups(self) -> list[dict[str, Any]]:
        out = []
        for i, ((cls, _n, w), layers) in enumerate(zip(self.groups, self.group_layers)):
            g = {
                "group_id": i,
                "spec_class": MOD + cls,
                "kind": "attention",
                "layer_names": list(layers),
                "block_size_tokens": self.B,
                "page_size_bytes": self.page,
                "sliding_window": None if cls == "ChunkedLocalAttentionSpec" else w,
                "prefix_cacheable": True,
                "host_resident": False,
                "role": "default",
                "startup_blocks_per_request": self.startup(cls, w) if self.hybrid else None,
            }
            if self.hybrid:
                g["layer_specs"] = {name: self._spec(cls, w) for name in layers}
            out.append(g)
        return out

    def _view(self, offset: int, block_stride: int) -> dict[str, Any]:
        e, H, B, D = 2, self.heads, self.B, self.head
        v = {
            "storage_id": "s0",
            "storage_offset_bytes": offset,
            "dtype": "torch.bfloat16",
            "shape": [self.n, 2, H, B, D],
            "stride_bytes": [block_stride, H * B * D * e, B * D * e, D * e, e],
            "element_size_bytes": e,
            "block_axis": 0,
            "kernel_block_size_tokens": B,
        }
        if self.hybrid:
            v["kernel_block_stride"] = 0
        return v

    def _worker_cache(self, rank: int) -> dict[str, Any]:
        n, P, page = self.n, self.P, self.page
        storages, allocations, views = [], [], {}
        if self.hybrid:
            size = n * P
            storages.append({"storage_id": "s0", "device": f"cuda:{rank}", "pointer": 1 << 40, "size_bytes": size})
            outer = self.layout in ("LBHNC", "LBNHC")
            for layers in self.group_layers:
                ls, bs = (n * page, page) if outer else (page, P)
                allocations.append(
                    {
                        "storage_id": "s0",
                        "size": size,
                        "layers": list(layers),
                        "layer_stride": ls,
                        "block_stride": bs,
                        "offset": 0,
                    }
                )
                for pos, name in enumerate(layers):
                    views[name] = [self._view(pos * ls, bs)]
        else:
            width = max(len(ls) for ls in self.group_layers)
            for slot in range(width):
                sid = f"s{slot}"
                storages.append(
                    {
                        "storage_id": sid,
                        "device": f"cuda:{rank}",
                        "pointer": (1 << 40) + slot * n * page,
                        "size_bytes": n * page,
                    }
                )
                shared = [ls[slot] for ls in self.group_layers if slot < len(ls)]
                allocations.append(
                    {
                        "storage_id": sid,
                        "size": n * page,
                        "layers": shared,
                        "layer_stride": None,
                        "block_stride": 0,
                        "offset": 0,
                    }
                )
                for name in shared:
                    v = self._view(0, page)
                    v["storage_id"] = sid
                    views[name] = [v]
            size = width * n * page
        groups = self._worker_groups()
        return {
            "num_blocks": n,
            "available_cache_bytes": size + 4096,
            "allocated_cache_bytes": size,
            "kv_cache_layout": self.layout if self.hybrid else None,
            "storages": storages,
            "allocations": allocations,
            "groups": groups,
            "layer_views": views,
            "attention_groups": [
                {
                    "kv_cache_group_id": i,
                    "backend": "FLASH_ATTN",
                    "layer_names": list(ls),
                    "kernel_block_size": None,
                    "kernel_block_stride": 0,
                }
                for i, ls in enumerate(self.group_layers)
            ]
            if self.hybrid
            else None,
            "model_runner": {
                "class": "vllm.v1.worker.gpu.model_runner.GPUModelRunner",
                "version": "v2",
                "kernel_block_sizes": [self.B] * len(groups),
            }
            if self.hybrid
            else None,
            "placement": "shared_pool",
        }

    def _scheduler_cache(self) -> dict[str, Any]:
        groups = []
        for g in self._worker_groups():
            copy = {
                k: g[k]
                for k in (
                    "group_id",
                    "layer_names",
                    "spec_class",
                    "block_size_tokens",
                    "page_size_bytes",
                    "sliding_window",
                    "prefix_cacheable",
                    "host_resident",
                    "role",
                    "startup_blocks_per_request",
                )
            }
            if self.hybrid:
                copy["spec_fields"] = g["layer_specs"][g["layer_names"][0]]["fields"]
            groups.append(copy)
        bs = self.scheduler_block
        return {
            "num_blocks": self.n,
            "free_blocks": self.n - 1,
            "null_block_id": 0,
            "reserved_block_ids": [0],
            "watermark_blocks": 0,
            "pool_count": 1,
            "block_size": bs,
            "hash_block_size": bs if self.hybrid else None,
            "cache_hit_alignment_tokens": bs if self.hybrid else None,
            "mamba_cache_mode": "none" if self.hybrid else None,
            "groups": groups,
            "startup": {
                "max_model_len": self.L,
                "max_in_flight_tokens": self.T,
                "kv_cache_max_concurrency": self.concurrency,
                "kv_cache_size_tokens": self.size_tokens,
            }
            if self.hybrid
            else None,
        }

    def _record(self, phase: str, kind: str, tp: int | None) -> dict[str, Any]:
        rec = G.record(phase, kind, tp)
        rec["binding"].update(configuration=self.config, attempt_id=self.attempt)
        rec["launch"] = self._launch()
        rec["runtime"]["version"] = self.version
        if not self.hybrid:
            rec["observer"]["plugin"] = "fpmcore-vllm027"
            rec.pop("prefix_caching")
        else:
            rec["prefix_caching"] = {
                "enable_prefix_caching": True,
                "mamba_cache_mode": "none",
                "hash_block_size": self.scheduler_block,
            }
        rec["model"].update(path="example/plain-model")
        rec["settings"] = self._settings(kind)
        rec["cache"] = self._worker_cache(tp or 0) if kind == "worker" else self._scheduler_cache()
        return rec

"""The vllm_027 observer on the real vLLM 0.27.0 (02 §3.14, I-76), on CPU.

Every ``KVCacheConfig`` here is planned by vLLM 0.27.0's own engine-core
planning (:func:`fpmcore_vllm027.probe.plan`: ``get_kv_cache_configs``,
``generate_scheduler_kv_cache_config``, ``get_kv_cache_capacity``,
``resolve_kv_cache_block_sizes``, the real ``Scheduler``); live tensors are
allocated and viewed by vLLM 0.27.0's own ``_allocate_kv_cache`` and
``_reshape_attention_kv_cache`` (vllm/v1/worker/gpu/attn_utils.py).  The
tests skip unless the installed vLLM is exactly 0.27.0 (tox.ini
``vllm027-real``).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.real

vllm = pytest.importorskip("vllm")
if vllm.__version__ != "0.27.0":
    pytest.skip(f"needs vLLM 0.27.0; vLLM {vllm.__version__} is installed", allow_module_level=True)

from fpmcore_vllm027 import plugin, probe
from fpmcore_vllm027.observe import SOURCE_FILES
from fpmcore_vllm_support import dryprobe

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "tools" / "probe_models"
PLAIN = MODELS / "plain_llama8b.json"  # 32 full-attention layers, 8 KV heads x 128, bf16, 16-token blocks
SLIDING = MODELS / "sliding_full.json"  # 12 sliding-window (128) + 12 full layers, 8 KV heads x 64
MANIFEST = {"configuration": "c", "attempt_id": "a", "launch": {}}
MODEL = {"path": "m", "revision": "r", "config_sha256": "d" * 64, "loaded_config_commit": None}
NULL_SETTINGS = {  # the keys marked ⁰ in 02 §3.4
    ("cache", "mamba_cache_mode"), ("cache", "mamba_block_size"), ("cache", "prefix_match_unit"),
    ("cache", "hash_block_size"), ("cache", "kv_cache_layout"), ("cache", "prefix_cache_retention_interval"),
    ("scheduler", "max_in_flight_tokens"),
}  # fmt: skip


def _model(path: Path, **over: Any) -> dict[str, Any]:
    return {**json.loads(path.read_text()), **over}


def _plan(model: dict[str, Any], *, cross_layers: bool = False):
    """vLLM 0.27.0's engine-core planning; ``cross_layers`` opts in to vLLM's packed plan."""
    probe.prepare_environment()
    with tempfile.TemporaryDirectory() as d:
        Path(d, "config.json").write_bytes(dryprobe.stub_config_bytes())
        if not cross_layers:
            return probe.plan(model, tp=1, caching=True, model_dir=d)
        from vllm.config import KVTransferConfig
        from vllm.v1.core.kv_cache_utils import get_kv_cache_configs
        from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs

        vc = probe.build_vllm_config(model, tp=1, caching=True, model_dir=d)
    register_all_kvcache_specs(vc)
    # --enable-cross-layers (kv_connector_extra_config) selects _get_kv_cache_config_packed for several groups
    vc.kv_transfer_config = KVTransferConfig(
        kv_connector="ExampleConnector",
        kv_role="kv_both",
        kv_connector_extra_config={"enable_cross_layers_blocks": "true"},
    )
    (cfg,) = get_kv_cache_configs(vc, [probe.build_layer_specs(model, vc)], [int(model["available_memory_bytes"])])
    return vc, cfg


def _worker(p, **source: Any) -> dict[str, Any]:
    src = {**dryprobe.worker_source(p, MANIFEST, 0, MODEL, "e" * 64), **source}
    return plugin.fpm_observe_cache_groups(source=src, phase="prefill", rank=0)


def _scheduler(p) -> dict[str, Any]:
    src = dryprobe.scheduler_source(p, MANIFEST, MODEL, "e" * 64)
    return plugin.fpm_observe_cache_groups(source=src, phase="prefill", rank=0)


def _check_i76(cache: dict[str, Any]) -> list[str]:
    """02 I-76 for a record without layer strides; returns each allocation's form ('packed' or 'whole')."""
    n = cache["num_blocks"]
    group_of = {name: g["group_id"] for g in cache["groups"] for name in g["layer_names"]}
    page_of = {name: g["page_size_bytes"] for g in cache["groups"] for name in g["layer_names"]}
    allocs = cache["allocations"]
    forms, packed = [], []
    for a in allocs:
        assert a["layer_stride"] is None and a["size"] % n == 0
        slot = a["size"] // n
        assert a["block_stride"] in (0, slot)
        assert len({group_of[name] for name in a["layers"]}) == len(a["layers"])  # one layer per group
        page = max(page_of[name] for name in a["layers"])
        if a["block_stride"] == 0:
            same = [b for b in allocs if b["storage_id"] == a["storage_id"]]
            assert a["offset"] == 0 and (a["storage_id"] is None or len(same) == 1)
            forms.append("whole")
        else:
            assert a["offset"] + page <= slot
            for sid, off, pg in packed:
                assert not (sid == a["storage_id"] and off < a["offset"] + page and a["offset"] < off + pg)
            packed.append((a["storage_id"], a["offset"], page))
            forms.append("packed")
    return forms


def _check_0_27_shape(record: dict[str, Any]) -> None:
    """02 §3.14: the keys a vllm_027 record leaves out or empties."""
    assert "prefix_caching" not in record
    assert record["runtime"]["version"] == "0.27.0" and record["observer"]["plugin"] == "fpmcore-vllm027"
    assert (
        all(record["settings"][s][k] is None for s, k in NULL_SETTINGS) and record["settings"]["model_runner"] is None
    )
    c = record["cache"]
    for g in c["groups"]:
        assert g["startup_blocks_per_request"] is None and not {"state", "layer_specs", "spec_fields"} & set(g)
    if record["binding"]["kind"] == "worker":
        assert (c["kv_cache_layout"], c["attention_groups"], c["model_runner"]) == (None, None, None)
        assert all("kernel_block_stride" not in v for views in c["layer_views"].values() for v in views)
    else:
        assert all(
            c[k] is None for k in ("hash_block_size", "cache_hit_alignment_tokens", "mamba_cache_mode", "startup")
        )


def test_plain_model_planned_by_vllm_0_27_0():
    """A plain full-attention model: one group, vLLM 0.27.0's num_blocks, one whole allocation per layer."""
    p = _plan(_model(PLAIN))
    cfg = p.worker_configs[0]
    w, s = _worker(p), _scheduler(p)
    for r in (w, s):
        _check_0_27_shape(r)
    page = 2 * 16 * 8 * 128 * 2  # K and V, 16 tokens, 8 heads x 128, bf16
    n = 20_000_000_000 // (32 * page)  # get_num_blocks: available // page // num_layers
    assert w["cache"]["num_blocks"] == s["cache"]["num_blocks"] == cfg.num_blocks == n == 9_536
    (g,) = w["cache"]["groups"]
    assert (g["spec_class"], g["kind"], g["block_size_tokens"], g["page_size_bytes"], g["sliding_window"]) == (
        "vllm.v1.kv_cache_interface.FullAttentionSpec", "attention", 16, page, None)  # fmt: skip
    assert g["layer_names"] == [f"model.layers.{i}.self_attn.attn" for i in range(32)]
    allocs = w["cache"]["allocations"]
    assert (
        [a["layers"] for a in allocs] == [t.shared_by for t in cfg.kv_cache_tensors] == [[x] for x in g["layer_names"]]
    )
    assert {a["size"] for a in allocs} == {n * page} and _check_i76(w["cache"]) == ["whole"] * 32
    assert w["lifecycle"]["measurement"] == "cache_planned"
    assert w["unresolved_fields"] == sorted(
        ["cache.allocated_cache_bytes", "cache.layer_views", "cache.storages", "hardware.device_name",
         "hardware.gpu", "hardware.sm", "hardware.total_memory_bytes"]
        + [f"cache.allocations[{k}].storage_id" for k in range(32)])  # fmt: skip
    sc = s["cache"]
    assert (sc["free_blocks"], sc["null_block_id"], sc["reserved_block_ids"], sc["block_size"]) == (n - 1, 0, [0], 16)
    assert s["unresolved_fields"] == []
    # runtime.source_files: the installed files are those of the vLLM 0.27.0 release the observer pins
    assert w["runtime"]["source_files"] == SOURCE_FILES
    assert p.vllm_config.cache_config.kv_cache_max_concurrency == (n * 16) / 131_072 == 1.1640625


def test_sliding_window_and_full_model_planned_by_vllm_0_27_0():
    """12 sliding-window (128) + 12 full layers: two groups; each tensor is shared by one layer of each group."""
    p = _plan(_model(SLIDING))
    cfg = p.worker_configs[0]
    w, s = _worker(p), _scheduler(p)
    for r in (w, s):
        _check_0_27_shape(r)
    page = 2 * 16 * 8 * 64 * 2
    n = 30_000_000_000 // (12 * page)  # group_size 12 layers, one uniform page
    assert w["cache"]["num_blocks"] == s["cache"]["num_blocks"] == cfg.num_blocks == n == 76_293
    sw, full = w["cache"]["groups"]
    assert (sw["spec_class"], sw["sliding_window"], len(sw["layer_names"]), sw["page_size_bytes"]) == (
        "vllm.v1.kv_cache_interface.SlidingWindowSpec", 128, 12, page)  # fmt: skip
    assert (full["spec_class"], full["sliding_window"], len(full["layer_names"]), full["page_size_bytes"]) == (
        "vllm.v1.kv_cache_interface.FullAttentionSpec", None, 12, page)  # fmt: skip
    assert [g["sliding_window"] for g in s["cache"]["groups"]] == [128, None]
    allocs = w["cache"]["allocations"]
    assert [a["layers"] for a in allocs] == [[f"model.layers.{2 * i}.self_attn.attn", f"model.layers.{2 * i + 1}.self_attn.attn"]
                                             for i in range(12)]  # fmt: skip
    assert {a["size"] for a in allocs} == {n * page} and _check_i76(w["cache"]) == ["whole"] * 12
    assert s["cache"]["free_blocks"] == n - 1


def test_packed_plan_gives_packed_allocations():
    """vLLM 0.27.0's packed plan (cross-layer blocks, two groups): every tensor aliases one backing of
    ``block_stride × n`` bytes at its own offset: packed allocations, block_stride = slot (I-76)."""
    vc, cfg = _plan(_model(SLIDING), cross_layers=True)
    page = 2 * 16 * 8 * 64 * 2
    n = cfg.num_blocks
    assert n == 30_000_000_000 // (12 * page) == 76_293
    p = _plan(_model(SLIDING))
    rec = _worker(p, kv_cache_config=cfg, vllm_config=vc)
    allocs = rec["cache"]["allocations"]
    assert _check_i76(rec["cache"]) == ["packed"] * 12
    assert [(a["offset"], a["block_stride"]) for a in allocs] == [(i * page, 12 * page) for i in range(12)]
    assert {a["size"] for a in allocs} == {12 * page * n}


def _live(model: dict[str, Any], kv_first: bool, cross_layers: bool = False):
    """Allocate and view the cache as vLLM 0.27.0's worker does, with the CPU attention backend's shape."""
    import torch
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
    from vllm.v1.worker.gpu.attn_utils import (
        _allocate_kv_cache,
        _reshape_attention_kv_cache,
    )

    p = _plan(model)
    vc, cfg = _plan(model, cross_layers=True) if cross_layers else (p.worker_vllm_config, p.worker_configs[0])
    raw = _allocate_kv_cache(cfg, {}, torch.device("cpu"))
    packing = {ln: (t.offset, t.block_stride) for t in cfg.kv_cache_tensors if t.block_stride > 0 for ln in t.shared_by}
    kv_caches = {}
    for g in cfg.kv_cache_groups:
        spec = g.kv_cache_spec
        shape = CPUAttentionBackend.get_kv_cache_shape(
            cfg.num_blocks, spec.block_size, spec.num_kv_heads, spec.head_size
        )
        if kv_first:  # a K/V-first backend shape, (2, num_blocks, block, heads, head_size)
            shape = (2, cfg.num_blocks, spec.block_size, spec.num_kv_heads, spec.head_size)
        for ln in g.layer_names:
            kv_caches[ln] = _reshape_attention_kv_cache(
                raw[ln], spec, shape, tuple(range(len(shape))), cfg.num_blocks, packing.get(ln)
            )
    lifecycle = {
        "measurement": "after_warmup",
        "cache_initialized": True,
        "warmup_completed": True,
        "capture_completed": False,
    }
    return cfg, _worker(p, vllm_config=vc, kv_cache_config=cfg, kv_caches=kv_caches, lifecycle=lifecycle)


def test_live_allocations_take_their_form_from_vllm_views():
    """02 §3.14, I-76: block-first views of separate tensors are packed (block_stride = slot); K/V-first
    views are whole (0); the packed plan's views share one storage at disjoint offsets."""
    small = _model(PLAIN, max_model_len=64, available_memory_bytes=8 * 32 * 65_536)
    cfg, rec = _live(small, kv_first=False)
    c = rec["cache"]
    assert c["num_blocks"] == cfg.num_blocks == 8
    assert len(c["storages"]) == 32 and c["allocated_cache_bytes"] == 32 * 8 * 65_536
    assert _check_i76(c) == ["packed"] * 32 and {a["block_stride"] for a in c["allocations"]} == {65_536}
    view = c["layer_views"]["model.layers.0.self_attn.attn"][0]
    assert (view["block_axis"], view["stride_bytes"][0], view["kernel_block_size_tokens"]) == (0, 65_536, 16)
    assert [a["storage_id"] for a in c["allocations"]] == [f"s{i}" for i in range(32)]
    assert not any(f.startswith("cache.") for f in rec["unresolved_fields"])
    _, rec = _live(small, kv_first=True)
    assert _check_i76(rec["cache"]) == ["whole"] * 32
    assert rec["cache"]["layer_views"]["model.layers.5.self_attn.attn"][0]["block_axis"] == 1
    sliding = _model(SLIDING, max_model_len=64, available_memory_bytes=32 * 12 * 32_768)
    cfg, rec = _live(sliding, kv_first=False, cross_layers=True)
    c = rec["cache"]
    assert len(c["storages"]) == 1 and c["allocated_cache_bytes"] == 12 * 32_768 * cfg.num_blocks
    assert _check_i76(c) == ["packed"] * 12 and {a["storage_id"] for a in c["allocations"]} == {"s0"}


@pytest.mark.parametrize(
    ("model", "groups", "blocks", "pool_page"),
    [(PLAIN, 1, 9_536, 32 * 65_536), (SLIDING, 2, 76_293, 12 * 32_768)],
)
def test_fpm_import_takes_the_dry_probe_complete(tmp_path, model, groups, blocks, pool_page):
    """``fpm probe --dry-run`` with vLLM 0.27.0, then ``fpm import``: complete, layout-level, with vLLM
    0.27.0's own num_blocks (kv_cache_bytes = free blocks × pool page, I-65)."""
    from fpmcore.testing import run_fpm

    out = tmp_path / "evidence"
    done = run_fpm("probe", "--dry-run", str(model), "-o", str(out), "--json", env={"VLLM_TARGET_DEVICE": "cpu"})
    assert done.exit_code == 0, done.stderr
    planned = done.json()
    assert planned["runtime"] == "vllm==0.27.0" and planned["plugin"] == "vllm_027"
    assert {ph["num_blocks"] for ph in planned["phases"].values()} == {blocks}
    assert {ph["pool_page_bytes"] for ph in planned["phases"].values()} == {pool_page}
    done = run_fpm("import", str(out), "--json")
    assert done.exit_code == 0, done.stderr
    doc = done.json()
    assert (doc["status"], doc["diagnostics"], doc["evidence"]) == ("complete", [], "layout")
    (dep,) = doc["profile"]["deployments"]
    assert dep["backend_version"] == "0.27.0"
    mem = dep["resources"]["runtime_memory"]
    assert mem["kv_cache_bytes"] == (blocks - 1) * pool_page
    assert len(dep["resources"]["cache_groups"]) == groups

"""The vLLM 0.27.0 record shape (02 §3.14): the committed example and the record writer."""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "probes" / "vllm-0.27.0-plain"
PLAIN = ROOT / "tools" / "probe_models" / "plain_llama8b.json"
NULL_SETTINGS = {  # the keys marked ⁰ in 02 §3.4
    ("cache", "mamba_cache_mode"), ("cache", "mamba_block_size"), ("cache", "prefix_match_unit"),
    ("cache", "hash_block_size"), ("cache", "kv_cache_layout"), ("cache", "prefix_cache_retention_interval"),
    ("scheduler", "max_in_flight_tokens"),
}  # fmt: skip


def _records():
    index = json.loads((EXAMPLE / "observations.json").read_text())
    (conf,) = index["configurations"].values()
    out = []
    for entry in conf["attempts"][0]["phases"].values():
        out += [json.loads((EXAMPLE / a["path"]).read_text()) for a in entry["artifacts"] if a["kind"] == "observation"]
    return conf, out


def test_example_has_no_hybrid_evidence():
    """02 §3.14: no prefix_caching, no state/layer_specs/spec_fields, the ⁰ keys null."""
    conf, records = _records()
    assert conf["launch"]["identity"]["framework_version"] == "0.27.0"
    assert len(records) == 4
    for r in records:
        assert "prefix_caching" not in r
        assert r["runtime"]["version"] == "0.27.0" and r["observer"]["plugin"] == "fpmcore-vllm027"
        assert all(r["settings"][s][k] is None for s, k in NULL_SETTINGS) and r["settings"]["model_runner"] is None
        for g in r["cache"]["groups"]:
            assert g["startup_blocks_per_request"] is None
            assert not {"state", "layer_specs", "spec_fields"} & set(g)
            assert g["spec_class"] == "vllm.v1.kv_cache_interface.FullAttentionSpec"
        if r["binding"]["kind"] == "worker":
            c = r["cache"]
            assert (c["kv_cache_layout"], c["attention_groups"], c["model_runner"]) == (None, None, None)
            assert c["groups"][0]["kind"] == "attention"
        else:
            c = r["cache"]
            assert all(c[k] is None for k in ("hash_block_size", "cache_hit_alignment_tokens", "mamba_cache_mode", "startup"))
            assert set(c["groups"][0]) == {"group_id", "layer_names", "spec_class", "block_size_tokens", "page_size_bytes",
                                           "sliding_window", "prefix_cacheable", "host_resident", "role",
                                           "startup_blocks_per_request"}  # fmt: skip


def test_example_allocations_take_the_packed_form_of_i76():
    """02 §3.14 I-76: one allocation per layer (shared_by), layer_stride null, block_stride = size / num_blocks."""
    _, records = _records()
    worker = next(r for r in records if r["binding"]["kind"] == "worker")
    c = worker["cache"]
    n = c["num_blocks"]
    (group,) = c["groups"]
    assert [a["layers"] for a in c["allocations"]] == [[name] for name in group["layer_names"]]
    for a in c["allocations"]:
        assert a["layer_stride"] is None and a["offset"] == 0
        assert a["size"] % n == 0 and a["block_stride"] == a["size"] // n == group["page_size_bytes"]
    assert group["page_size_bytes"] == 2 * 16 * 8 * 128 * 2  # K and V, 16 tokens, 8 heads x 128, bf16


def test_hook_answers_only_for_0_27_0():
    import fpmcore_vllm027 as plugin

    for pin in ("vllm==0.33.0", "vllm==0.27.1", "vllm==0.27"):
        assert plugin.fpm_observe_cache_groups(runtime=pin, source={}, phase="prefill", rank=0) is None


def test_observer_imports_without_vllm(monkeypatch):
    import importlib

    for mod in ("vllm", "torch"):
        monkeypatch.setitem(sys.modules, mod, None)
    monkeypatch.delitem(sys.modules, "fpmcore_vllm027.observe", raising=False)
    importlib.import_module("fpmcore_vllm027.observe")


def _plan(model_file: Path, layout: str | None = None):
    pytest.importorskip("fpmcore_vllm033")
    from fpmcore_vllm033 import probe

    model = json.loads(model_file.read_text())
    if layout:
        model["kv_cache_layout"] = layout
    with tempfile.TemporaryDirectory() as d:
        Path(d, "config.json").write_bytes(probe.stub_config_bytes())
        return probe, probe.plan(model, tp=1, caching=True, model_dir=d)


MANIFEST = {"configuration": "plain", "attempt_id": "a", "launch": {}}
MODEL = {"path": "m", "revision": "r", "config_sha256": "d" * 64, "loaded_config_commit": None}


@pytest.mark.real
def test_writer_needs_the_0_27_0_runtime_or_an_explicit_version():
    from fpmcore_vllm027.observe import build_record

    probe, p = _plan(PLAIN)
    with pytest.raises(RuntimeError, match="0.27.0"):
        build_record(probe.worker_source(p, MANIFEST, 0, MODEL), phase="prefill", rank=0)
    rec = build_record({**probe.worker_source(p, MANIFEST, 0, MODEL), "runtime_version": "0.27.0"}, phase="prefill", rank=0)
    assert rec["runtime"]["version"] == "0.27.0" and rec["cache"]["num_blocks"] == p.scheduler_config.num_blocks
    assert len(rec["cache"]["allocations"]) == 32


@pytest.mark.real
def test_block_outer_plans_have_no_0_27_0_form():
    """vLLM 0.27.0 allocates one tensor per layer; a block-outer plan cannot be rendered as one."""
    from fpmcore_vllm027.observe import build_record

    probe, p = _plan(PLAIN, layout="BLHNC")
    with pytest.raises(ValueError, match="block-outer"):
        build_record({**probe.worker_source(p, MANIFEST, 0, MODEL), "runtime_version": "0.27.0"}, phase="prefill", rank=0)


@dataclasses.dataclass
class KVCacheTensor027:
    """vLLM 0.27.0's ``KVCacheTensor`` (size, shared_by): 0.27.0 is not installed next to 0.33.0."""

    size: int
    shared_by: list[str]


def _live_027_record(block_first: bool):
    """A small plain model planned by vLLM, allocated the vLLM 0.27.0 way: one CPU tensor per layer."""
    import torch

    from fpmcore_vllm027.observe import build_record

    model = json.loads(PLAIN.read_text())
    model.update(max_model_len=64, available_memory_bytes=6 * 32 * 65536 + 1000)
    tmp = Path(tempfile.mkdtemp()) / "small.json"
    tmp.write_text(json.dumps(model))
    probe, p = _plan(tmp)
    cfg = p.worker_configs[0]
    n = cfg.num_blocks
    (group,) = cfg.kv_cache_groups
    page = group.kv_cache_spec.page_size_bytes
    tensors = [KVCacheTensor027(size=page * n, shared_by=[name]) for name in group.layer_names]
    kv_caches = {}
    for t in tensors:
        raw = torch.zeros(t.size, dtype=torch.int8).view(torch.bfloat16)
        # FlashAttention binds (2, n, B, H, D): K and V pages apart; FlashInfer (n, 2, B, H, D): one page per block
        shape = (n, 2, 16, 8, 128) if block_first else (2, n, 16, 8, 128)
        kv_caches[t.shared_by[0]] = raw.view(shape)
    source = {**probe.worker_source(p, MANIFEST, 0, MODEL), "runtime_version": "0.27.0",
              "kv_cache_config": dataclasses.replace(cfg, kv_cache_tensors=tensors), "kv_caches": kv_caches}  # fmt: skip
    return n, page, build_record(source, phase="prefill", rank=0)


@pytest.mark.real
def test_live_allocations_take_the_whole_or_packed_form_from_the_views():
    """02 §3.14 I-76: block_stride is the slot when each block is one contiguous page, else 0 (whole)."""
    n, page, rec = _live_027_record(block_first=False)
    c = rec["cache"]
    assert len(c["storages"]) == 32 and c["allocated_cache_bytes"] == 32 * page * n
    assert {a["block_stride"] for a in c["allocations"]} == {0}
    view = c["layer_views"]["model.layers.0.self_attn.attn"][0]
    assert (view["block_axis"], view["shape"], view["kernel_block_size_tokens"]) == (1, [2, n, 16, 8, 128], 16)
    assert "kernel_block_stride" not in view
    assert [a["storage_id"] for a in c["allocations"]] == [f"s{i}" for i in range(32)]
    n, page, rec = _live_027_record(block_first=True)
    allocs = rec["cache"]["allocations"]
    assert {a["block_stride"] for a in allocs} == {page} == {a["size"] // n for a in allocs}
    assert rec["cache"]["layer_views"]["model.layers.5.self_attn.attn"][0]["block_axis"] == 0

"""The vLLM 0.33.0 observer on live objects built by vLLM's own code on CPU.

The GLM-5.3-Flash TP 4 cache is planned by vLLM (``get_kv_cache_configs``),
its tensors are laid out by vLLM's ``allocate_kv_cache`` on the ``meta``
device (the real view arithmetic, no memory), the KDA layers split their pages
with ``MambaBase.bind_kv_cache`` and the indexer views are remapped to
128-token kernel blocks by ``AttentionGroup.map_kv_cache_to_kernel_blocks``,
as the model runner does.  The record must give the views of 02 §11.3.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from fpmcore_vllm_support import dryprobe

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[3]
GLM = ROOT / "tools" / "probe_models" / "glm53flash_tp4.json"
L = "language_model.model.layers.{}.self_attn"
MANIFEST = {"configuration": "glm53flash-tp4", "attempt_id": "gb300-tp4-col-43ca7402", "launch": {"identity": {}}}
MODEL = {"path": "zai-org/GLM-5.3-Flash", "revision": "04c4e9e95c5da8862dced7e5056455116f83a7e0",
         "config_sha256": "d" * 64, "loaded_config_commit": "04c4e9e95c5da8862dced7e5056455116f83a7e0"}  # fmt: skip
HARDWARE = {"gpu": "gb300", "sm": 103, "device_name": "NVIDIA GB300", "total_memory_bytes": 288_000_000_000}


@pytest.fixture(scope="module")
def glm():
    """vLLM's plan of the GLM TP 4 fixture and the views a GPU worker would bind (on ``meta``)."""
    from fpmcore_vllm033 import probe

    probe.prepare_environment()
    import torch
    from vllm.model_executor.layers.mamba.abstract import MambaBase
    from vllm.v1.attention.backends.gdn_attn import GDNAttentionBackend
    from vllm.v1.attention.backends.mla.flashmla_sparse import FlashMLASparseBackend
    from vllm.v1.attention.backends.mla.indexer import Glm5NextIndexerBackend, KpoolTailBackend
    from vllm.v1.attention.backends.utils import KVCacheLayout
    from vllm.v1.kv_cache_interface import MambaSpec
    from vllm.v1.worker.utils import AttentionGroup, allocate_kv_cache, map_kv_caches_to_kernel_blocks

    with tempfile.TemporaryDirectory() as d:
        Path(d, "config.json").write_bytes(dryprobe.stub_config_bytes())
        p = probe.plan(json.loads(GLM.read_text()), tp=4, caching=True, model_dir=d)
    cfg = p.worker_configs[1]
    kernel_block_sizes = [2176] * 5 + [4]
    raw = allocate_kv_cache(cfg, torch.device("meta"), KVCacheLayout.BLHNC, kernel_block_sizes)
    attn_groups = []
    for gid, group in enumerate(cfg.kv_cache_groups):
        inner = group.kv_cache_spec.kv_cache_specs
        names = list(group.layer_names)
        if gid < 4:
            attn_groups.append([AttentionGroup(GDNAttentionBackend, names, inner[names[0]], gid)])
        elif gid == 4:
            idx = [n for n in names if n.endswith("indexer.k_cache")]
            lat = [n for n in names if n.endswith(".attn")]
            attn_groups.append([
                AttentionGroup(Glm5NextIndexerBackend, idx, inner[idx[0]], gid, kernel_block_size=128),
                AttentionGroup(FlashMLASparseBackend, lat, inner[lat[0]], gid),
            ])  # fmt: skip
        else:
            attn_groups.append([AttentionGroup(KpoolTailBackend, names, inner[names[0]], gid)])
    bound = map_kv_caches_to_kernel_blocks(raw, [g for gs in attn_groups for g in gs])
    for name, spec in p.layer_specs.items():
        if isinstance(spec, MambaSpec):  # the KDA layer's own split of its page into conv/recurrent state
            layer = SimpleNamespace(get_state_shape=lambda s=spec: s.shapes, get_state_dtype=lambda s=spec: s.dtypes)
            MambaBase.bind_kv_cache(layer, bound[name])
            bound[name] = layer.kv_cache
    runner = SimpleNamespace(attn_groups=attn_groups, _kernel_block_sizes=kernel_block_sizes)  # vLLM's attribute
    return p, cfg, bound, runner


def _worker_record(glm, **extra):
    from fpmcore_vllm033 import plugin, probe

    p, cfg, bound, runner = glm
    source = probe.worker_source(p, MANIFEST, 1, MODEL)
    source.update(kv_caches=bound, model_runner=runner, hardware=HARDWARE, image="vllm/vllm-openai@sha256:" + "a" * 64,
                  source_revision="4ba787ec" + "0" * 32,
                  lifecycle={"cache_initialized": True, "warmup_completed": True, "capture_completed": True}, **extra)  # fmt: skip
    return plugin.build_record(source, phase="prefill", rank=1)


def test_views_reproduce_02_section_11_3(glm):
    rec = _worker_record(glm)
    c = rec["cache"]
    assert rec["unresolved_fields"] == [] and rec["error"] is None
    assert rec["binding"]["rank"] == {"dp": 0, "tp": 1, "pp": 0}
    (storage,) = c["storages"]
    assert (storage["storage_id"], storage["size_bytes"]) == ("s0", 185139609600)
    assert c["allocated_cache_bytes"] == 185139609600 == 13697 * 13516800
    assert {a["storage_id"] for a in c["allocations"]} == {"s0"}
    views = c["layer_views"]
    for i, n in enumerate([0, 5, 10]):  # KDA group 0: conv then recurrent state, per 02 §11.3
        conv, rec_state = views[L.format(n)]
        assert (conv["shape"], conv["stride_bytes"], conv["dtype"]) == (
            [13697, 6144, 3],
            [13516800, 6, 2],
            "torch.bfloat16",
        )
        assert (rec_state["shape"], rec_state["stride_bytes"], rec_state["dtype"]) == (
            [13697, 16, 128, 128],
            [13516800, 65536, 512, 4],
            "torch.float32",
        )
        assert (conv["storage_offset_bytes"], rec_state["storage_offset_bytes"]) == (i * 1114112, i * 1114112 + 36864)
        assert (conv["kernel_block_size_tokens"], conv["kernel_block_stride"]) == (2176, 0)
    for i, n in enumerate([3, 7]):
        (idx,) = views[f"{L.format(n)}.indexer.k_cache"]
        (lat,) = views[f"{L.format(n)}.attn"]
        (ring,) = views[f"{L.format(n)}.indexer.tail_cache"]
        # vLLM 0.33.0 binds 4-D [B, H, N, C] views; 02 §11.3 prints them without the H axis of length 1
        assert (idx["shape"], idx["stride_bytes"]) == ([43827217, 1, 32, 132], [4224, 71808, 132, 1])
        assert (idx["storage_offset_bytes"], idx["kernel_block_size_tokens"], idx["kernel_block_stride"]) == (
            i * 71808,
            128,
            3200,
        )
        assert (lat["shape"], lat["stride_bytes"]) == ([13697, 1, 2176, 512], [13516800, 1114112, 512, 1])
        assert (lat["storage_offset_bytes"], lat["kernel_block_size_tokens"], lat["kernel_block_stride"]) == (
            789888 + i * 1114112,
            2176,
            0,
        )
        assert (ring["shape"], ring["stride_bytes"], ring["storage_offset_bytes"]) == (
            [13697, 2, 4, 128],
            [13516800, 1024, 256, 2],
            i * 2048,
        )
        assert ring["kernel_block_size_tokens"] == 4
    # I-82/I-83/I-85 arithmetic on the indexer view: coverage, block stride, extent within the 71,808-byte page
    assert idx["shape"][0] == (13697 - 1) * 3200 + 17 and idx["stride_bytes"][0] * 3200 == 13516800
    extent = 16 * 4224 + sum((s - 1) * b for s, b in zip(idx["shape"][1:], idx["stride_bytes"][1:])) + 1
    assert extent == 71808


def test_attention_groups_and_model_runner(glm):
    c = _worker_record(glm)["cache"]
    ags = c["attention_groups"]
    assert [a["kv_cache_group_id"] for a in ags] == [0, 1, 2, 3, 4, 4, 5]
    assert [(a["kernel_block_size"], a["kernel_block_stride"]) for a in ags] == [(None, 0)] * 4 + [
        (128, 3200),
        (None, 0),
        (None, 0),
    ]
    assert ags[4]["backend"] == "DEEPSEEK_V32_INDEXER" and len(ags[4]["layer_names"]) == 11
    assert c["model_runner"]["kernel_block_sizes"] == [2176, 2176, 2176, 2176, 2176, 4]


def test_without_tensors_the_record_lists_what_it_could_not_read(glm):
    from fpmcore_vllm033 import plugin, probe

    p = glm[0]
    rec = plugin.build_record(probe.worker_source(p, MANIFEST, 0, MODEL), phase="decode", rank=0)
    for path in ("cache.storages", "cache.layer_views", "cache.allocated_cache_bytes", "cache.attention_groups",
                 "cache.model_runner", "hardware.sm", "runtime.image"):  # fmt: skip
        assert path in rec["unresolved_fields"]
    assert rec["cache"]["layer_views"] == {} and rec["lifecycle"]["cache_initialized"] is False


def test_hook_through_the_plugin_host(glm):
    """fpm_observe_cache_groups reaches the plugin selected by the runtime pin and returns the record."""
    from fpmcore.documents.errors import FpmError
    from fpmcore.host.plugins import PluginHost
    from fpmcore_vllm033 import plugin

    host = PluginHost(plugins=[plugin], autoload=False)
    source = dryprobe.scheduler_source(glm[0], MANIFEST, MODEL)
    with pytest.raises(FpmError, match="no runtime plugin for vllm==0.27.0"):
        host.hooks.runtime("vllm==0.27.0").observe_cache_groups(source=source, phase="prefill", rank=0)
    rec = host.hooks.runtime("vllm==0.33.0").observe_cache_groups(source=source, phase="prefill", rank=0)
    assert rec == host.pm.hook.fpm_observe_cache_groups(runtime="vllm==0.33.0", source=source, phase="prefill", rank=0)
    assert rec["binding"]["kind"] == "scheduler" and rec["binding"]["rank"] == {"dp": 0, "tp": None, "pp": None}
    assert rec["cache"]["startup"]["kv_cache_max_concurrency"] == 27.67070707070707
    assert "hardware" not in rec


def test_encode_value_of_vllm_objects():
    """02 §3.7: dtypes, MultipleOf, enums by member name, Fraction."""
    from fractions import Fraction

    import torch
    from vllm.v1.attention.backend import MultipleOf
    from vllm.v1.kv_cache_interface import KVQuantMode, SparseCacheRole

    from fpmcore_vllm_support.encode import encode_value

    assert encode_value(torch.bfloat16) == "torch.bfloat16"
    assert encode_value(MultipleOf(128)) == {"multiple_of": 128}
    assert encode_value(SparseCacheRole.INDEXER) == "INDEXER"
    assert encode_value(KVQuantMode.FP8_PER_TENSOR) == "FP8_PER_TENSOR"
    assert encode_value(Fraction(1, 2)) == "1/2"

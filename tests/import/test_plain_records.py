"""Plain attention layouts: sliding windows checked with vLLM 0.33.0's formulas, vLLM 0.27.0 records, the plugin gate.

**[beyond reference]** I-103 and I-104 are checked for layouts with a
sliding-window group too (03 C-1 window term, C-2 in-flight tokens), with the
vectors of 03 §10.1.
"""

from __future__ import annotations

import fpm_import_attn_fixture as A
import pytest

from fpmcore import API_VERSION, PluginInfo, SpecClassification, hookimpl


def _complete(result):
    assert result.complete, [d.render() for d in result.diagnostics]
    return result.results[0]


def _rules(result):
    return [(d.rule, d.message) for d in result.diagnostics]


# -- 03 §10.1 vectors through the import ---------------------------------------------


def test_v5_minimax_single_group(run_import):
    """V5: 62 full layers, B 16, L 8,192, 203,368 blocks: concurrency 397.203125, size 3,253,888 (LBHNC)."""
    ev = A.AttnEvidence(
        [("FullAttentionSpec", 62, None)],
        block=16,
        max_model_len=8192,
        num_blocks=203368,
        heads=2,
        head=128,
        layout="LBHNC",
    )
    assert ev.blocks_per_request == [512]
    assert ev.concurrency == 397.203125 and ev.size_tokens == 3253888
    r = _complete(run_import(ev))
    (st, _d) = r.provenance["startup"]
    assert (st["blocks_per_request"], st["kv_cache_max_concurrency"], st["kv_cache_size_tokens"]) == (
        512,
        397.203125,
        3253888,
    )
    groups = r.draft["deployments"][0]["resources"]["cache_groups"]
    assert [(g["name"], g["kind"], g["num_layers"], g["block_size_tokens"]) for g in groups] == [
        ("runtime_group_0", "attention", 62, 16)
    ]
    assert groups[0]["page_size_bytes"] == 62 * 16384
    mem = r.draft["deployments"][0]["resources"]["runtime_memory"]
    assert (mem["enable_prefix_caching"], mem["mamba_cache_mode"], mem["hash_block_size_tokens"]) == (True, "none", 16)


def test_minimax_prefix_match_unit_refused(run_import):
    """02 §12, MiniMax variant: ``prefix_match_unit`` 8 with one group and prefix caching (I-97)."""
    ev = A.AttnEvidence(
        [("FullAttentionSpec", 62, None)],
        block=16,
        max_model_len=8192,
        num_blocks=203368,
        heads=2,
        head=128,
        layout="LBHNC",
    )
    for r in ev.all_records():
        r["settings"]["cache"]["prefix_match_unit"] = 8
    assert (
        "I-97",
        "scheduler block sizes contradict its cache groups: a single cache group with prefix caching "
        "needs prefix_match_unit null or 16; got 8",
    ) in _rules(run_import(ev))


def test_v9_sliding_window_only(run_import):
    """V9 [beyond reference]: 32 SWA layers, W 4,096: 769 blocks, concurrency 6.501950585175552, size 213,055."""
    ev = A.AttnEvidence([("SlidingWindowSpec", 32, 4096)], num_blocks=5000)
    assert ev.blocks_per_request == [769]
    assert ev.concurrency == 6.501950585175552 and ev.size_tokens == 213055
    r = _complete(run_import(ev))
    assert r.provenance["startup"][0]["kv_cache_max_concurrency"] == 6.501950585175552
    assert r.draft["deployments"][0]["resources"]["cache_groups"][0]["sliding_window"] == 4096


def test_v10_full_and_sliding_window(run_import):
    """V10 [beyond reference]: 12 full + 12 SWA (W 128): 2,048 + 521 = 2,569; 3.8925652004671076; 127,551."""
    ev = A.AttnEvidence([("FullAttentionSpec", 12, None), ("SlidingWindowSpec", 12, 128)], num_blocks=10000)
    assert ev.blocks_per_request == [2048, 521]
    assert ev.concurrency == 3.8925652004671076 and ev.size_tokens == 127551
    r = _complete(run_import(ev))
    st = r.provenance["startup"][0]
    assert (st["blocks_per_request_by_group"], st["kv_cache_size_tokens"]) == ([2048, 521], 127551)
    groups = r.draft["deployments"][0]["resources"]["cache_groups"]
    assert [g["sliding_window"] for g in groups] == [None, 128]


def test_full_and_chunked_local_attention(run_import):
    """A Llama 4-like layout: 12 full + 36 chunked-local layers (chunk 8,192, vLLM's
    ChunkedLocalAttentionSpec): 2,048 + cdiv(min(8,192 + 8,192, 32,768), 16) = 1,024 blocks a request;
    the draft's chunked group is an attention group with its attention_chunk_size."""
    ev = A.AttnEvidence([("FullAttentionSpec", 12, None), ("ChunkedLocalAttentionSpec", 12, 8192)] + [
        ("ChunkedLocalAttentionSpec", 12, 8192)] * 2, num_blocks=10000)  # fmt: skip
    assert ev.blocks_per_request == [2048, 1024, 1024, 1024]
    r = _complete(run_import(ev))
    assert r.provenance["startup"][0]["blocks_per_request_by_group"] == [2048, 1024, 1024, 1024]
    groups = r.draft["deployments"][0]["resources"]["cache_groups"]
    assert [(g["kind"], g["sliding_window"], g.get("attention_chunk_size")) for g in groups] == [
        ("attention", None, None)] + [("attention", None, 8192)] * 3  # fmt: skip


@pytest.mark.parametrize(
    ("change", "layer"),
    [
        (lambda f: f.update(attention_chunk_size=None), 12),  # a chunked-local layer without its chunk
        (lambda f: f.update(attention_chunk_size=0), 12),
        (lambda f: f.update(attention_chunk_size=4096), 13),  # two chunks in one group
    ],
)
def test_a_chunk_that_does_not_match_its_class_is_refused(run_import, change, layer):
    """I-46: a chunked-local group holds one positive chunk on every layer."""
    ev = A.AttnEvidence([("FullAttentionSpec", 12, None), ("ChunkedLocalAttentionSpec", 12, 8192)], num_blocks=10000)
    for r in ev.workers("prefill"):
        change(r["cache"]["groups"][1]["layer_specs"][f"model.layers.{layer}.self_attn.attn"]["fields"])
    assert (
        "I-46",
        f"unsupported or unresolved extra/chunk cache retention: model.layers.{layer}.self_attn.attn",
    ) in _rules(run_import(ev))


def test_sliding_window_concurrency_without_window_term_refused(run_import):
    """I-103 [beyond reference]: a concurrency that ignores the window's in-flight term is refused."""
    ev = A.AttnEvidence([("FullAttentionSpec", 12, None), ("SlidingWindowSpec", 12, 128)], num_blocks=10000)
    wrong = 10000 / (2048 + 9)  # window counted as cdiv(128, 16) + 1, without T
    ev.scheduler()["cache"]["startup"].update(kv_cache_max_concurrency=wrong, kv_cache_size_tokens=int(wrong * 32768))
    assert (
        "I-103",
        f"prefill scheduler dp0 records kv_cache_max_concurrency {wrong!r}, which gives 2057 blocks "
        "per request, but its cache groups reserve 2569",
    ) in _rules(run_import(ev))


def test_sliding_window_size_tokens_refused(run_import):
    """I-104 [beyond reference] on a sliding-window layout."""
    ev = A.AttnEvidence([("FullAttentionSpec", 12, None), ("SlidingWindowSpec", 12, 128)], num_blocks=10000)
    ev.scheduler("decode")["cache"]["startup"]["kv_cache_size_tokens"] = 127552
    assert (
        "I-104",
        "decode scheduler dp0 records kv_cache_size_tokens 127552, but int(3.8925652004671076 x 32768) = 127551",
    ) in _rules(run_import(ev))


def test_sliding_window_startup_count_refused(run_import):
    """I-61 [beyond reference] checks the window term of every group."""
    ev = A.AttnEvidence([("FullAttentionSpec", 12, None), ("SlidingWindowSpec", 12, 128)], num_blocks=10000)
    for r in ev.phase_records("prefill"):
        r["cache"]["groups"][1]["startup_blocks_per_request"] = 9
    assert (
        "I-61",
        "cache group 1 records startup_blocks_per_request 9, but vLLM 0.33.0 reserves 521 "
        "(cdiv(min(128 - 1 + 0 + 8192, 32768), 16) + 1)",
    ) in _rules(run_import(ev))


def test_i102_pool_too_small(run_import):
    """I-102 [beyond reference], 03 C-10 vector V8: 2,048 blocks cannot hold 2,048 blocks plus the null block."""
    ev = A.AttnEvidence([("FullAttentionSpec", 32, None)], num_blocks=2048)
    assert (
        "I-102",
        "prefill scheduler dp0 pool of 2048 blocks cannot hold one request at max_model_len: "
        "2048 blocks plus the null block",
    ) in _rules(run_import(ev))


def test_v7_one_request_fits(run_import):
    """V7: 2,049 blocks hold one request: concurrency 1.00048828125, size 32,784."""
    ev = A.AttnEvidence([("FullAttentionSpec", 32, None)], num_blocks=2049)
    assert (ev.concurrency, ev.size_tokens) == (1.00048828125, 32784)
    _complete(run_import(ev))


# -- vLLM 0.27.0 records (02 §3.14) ----------------------------------------------------


def test_vllm027_plain_record_imports(run_import):
    """A ``vllm_027`` record: no hybrid evidence, §5.1 classes, whole allocations; the draft has no evidence fields."""
    ev = A.AttnEvidence(
        [("FullAttentionSpec", 4, None), ("SlidingWindowSpec", 4, 1024)],
        version="0.27.0",
        hybrid=False,
        num_blocks=3000,
    )
    r = _complete(run_import(ev))
    mem = r.draft["deployments"][0]["resources"]["runtime_memory"]
    assert set(mem) == {"kv_cache_bytes", "gpu_memory_utilization", "max_model_len", "provenance"}
    assert mem["kv_cache_bytes"] == 2999 * 4 * ev.page
    assert r.provenance["startup"] == [] and r.provenance["prefix_caching"] is None
    assert r.draft["deployments"][0]["backend_version"] == "0.27.0"


def test_vllm027_same_group_alias_refused(run_import):
    """I-76: two layers of one group in one allocation slot."""
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.27.0", hybrid=False, num_blocks=3000)
    for w in ev.workers("prefill"):
        c = w["cache"]
        moved = c["allocations"].pop(1)
        c["allocations"][0]["layers"] += moved["layers"]
        c["storages"] = [st for st in c["storages"] if st["storage_id"] != moved["storage_id"]]
        c["allocated_cache_bytes"] -= moved["size"]
    assert (
        "I-76",
        "layers in one cache group cannot alias the same allocation slot: "
        "model.layers.0.self_attn.attn and model.layers.1.self_attn.attn",
    ) in _rules(run_import(ev))


def test_vllm027_packed_stride_refused(run_import):
    """I-76: ``block_stride`` neither 0 nor the slot."""
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.27.0", hybrid=False, num_blocks=3000)
    for w in ev.workers("prefill"):
        w["cache"]["allocations"][2]["block_stride"] = 7
    msgs = _rules(run_import(ev))
    assert any(r == "I-76" and "block_stride 7 is neither 0 nor the slot" in m for r, m in msgs), msgs


def test_vllm027_mamba_refused(run_import):
    """§5.1: a record without hybrid evidence allows only FullAttentionSpec and SlidingWindowSpec (I-41)."""
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.27.0", hybrid=False)
    for r in ev.phase_records("prefill"):
        r["cache"]["groups"][0]["spec_class"] = A.MOD + "MLAAttentionSpec"
    assert (
        "I-41",
        "unsupported runtime cache spec: vllm.v1.kv_cache_interface.MLAAttentionSpec (records without "
        "hybrid evidence allow FullAttentionSpec and SlidingWindowSpec): group 0",
    ) in _rules(run_import(ev))


def test_vllm027_full_attention_with_window_refused(run_import):
    """I-45 in a ``vllm_027`` record: the group's ``sliding_window`` stands for its layers."""
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.27.0", hybrid=False)
    for r in ev.workers("prefill"):
        r["cache"]["groups"][0]["sliding_window"] = 512
    assert ("I-45", "full-attention cache cannot declare sliding retention: model.layers.0.self_attn.attn") in _rules(
        run_import(ev)
    )


# -- the plugin gate (02 §4, I-25) ---------------------------------------------------------


class Vllm0331:
    """A runtime plugin that declares vLLM 0.33.1 (a final patch release), with the §5.1 table."""

    @hookimpl
    def fpm_plugin_info(self):
        return PluginInfo(id="vllm_0331", kind="runtime", targets=("vllm==0.33.1",), api_version=API_VERSION)

    @hookimpl
    def fpm_classify_spec(self, runtime, spec_class, spec):
        if runtime != "vllm==0.33.1":
            return None
        if spec_class == A.MOD + "FullAttentionSpec":
            return SpecClassification(kind="attention")
        return SpecClassification(kind="unsupported", reason="not a plain class")


def plain_0331():
    return A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.33.1", hybrid=False)


def test_plain_0331_refused_without_a_plugin(run_import):
    """I-25: no installed plugin declares 0.33.1 (versions are exact strings)."""
    assert (
        "I-25",
        "no installed runtime plugin imports records of vLLM 0.33.1; installed: vllm_027 (0.27.0), vllm_033 (0.33.0)",
    ) in _rules(run_import(plain_0331()))


def test_plain_0331_accepted_with_a_plugin_that_declares_it(run_import):
    """02 §4: a plain-model record of a patch release imports once a plugin declares that version."""
    from fpmcore.importer import HostServices
    from fpmcore.testing import make_host

    host = make_host(Vllm0331(), entry_points=("vllm_027", "vllm_033"))
    r = _complete(run_import(plain_0331(), services=HostServices(host)))
    assert r.draft["deployments"][0]["backend_version"] == "0.33.1"


def test_hybrid_0331_refused_even_with_a_plugin(run_import):
    """I-22 runs before the plugin gate: hybrid evidence needs exactly 0.33.0, whatever plugins declare."""
    from fpmcore.importer import HostServices
    from fpmcore.testing import make_host

    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.33.1", hybrid=True)
    host = make_host(Vllm0331(), entry_points=("vllm_027", "vllm_033"))
    assert ("I-22", "hybrid cache evidence requires vLLM 0.33.0; the record names vLLM 0.33.1") in _rules(
        run_import(ev, services=HostServices(host))
    )


@pytest.mark.parametrize("version", ["0.31.0", "0.32.0", "0.33.1", "0.33.0.post1", "0.34.0"])
def test_hybrid_version_gate(run_import, version):
    """The version gate cases of the acceptance: hybrid records of these versions are refused (I-22)."""
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version=version, hybrid=True)
    assert ("I-22", f"hybrid cache evidence requires vLLM 0.33.0; the record names vLLM {version}") in _rules(
        run_import(ev)
    )


def test_plain_0330_record_imports(run_import):
    """A record without hybrid evidence naming 0.33.0 imports through the §5.1 table."""
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.33.0", hybrid=False)
    _complete(run_import(ev))

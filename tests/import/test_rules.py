"""Mutations of the GLM fixture beyond 02 §12: one test for each rule the spec leaves to its own test.

Each edit is refused with the named rule (and message); harmless edits and
the valid variants of 02 §13 import ``complete``.
"""

from __future__ import annotations

import copy
import json
import os

import fpm_import_attn_fixture as A
import fpm_import_glm_fixture as G
import pytest

P, D = "prefill", "decode"


def rules(result):
    return [(d.rule, d.message) for d in result.diagnostics]


def refused(result, rule, message=None):
    assert not result.complete and result.exit_code == 1
    got = rules(result)
    if message is None:
        assert any(r == rule for r, _m in got), got
    else:
        assert (rule, message) in got, got


def g(r, i):
    return r["cache"]["groups"][i]


def views(r, layer):
    return r["cache"]["layer_views"][layer]


def each(records, fn):
    for r in records:
        fn(r)


# -- edits of the GLM records: (id, edit, rule, message) -------------------------------------------


def _kda5_alignment(ev):
    for r in ev.workers(P):
        g(r, 0)["layer_specs"][G.kda(5)]["fields"]["prefill_checkpoint_alignment"] = 32


def _mode_none_with_caching(ev):
    for r in ev.phase_records(P):
        r["settings"]["cache"]["mamba_cache_mode"] = "none"
        r["prefix_caching"]["mamba_cache_mode"] = "none"
        for grp in r["cache"]["groups"][:4]:
            grp["startup_blocks_per_request"] = 1
            if "state" in grp:
                grp["state"]["mamba_cache_mode"] = "none"
            for spec in grp.get("layer_specs", {}).values():
                spec["fields"]["mamba_cache_mode"] = "none"
            if "spec_fields" in grp:
                grp["spec_fields"]["mamba_cache_mode"] = "none"
    s = ev.scheduler(P)["cache"]
    s["mamba_cache_mode"] = "none"
    s["startup"].update(kv_cache_max_concurrency=13697 / 487, kv_cache_size_tokens=int(13697 / 487 * G.L))


def _two_storages(ev):
    for r in ev.workers(P):
        c = r["cache"]
        half = G.ALLOCATED // 2
        c["storages"] = [
            dict(c["storages"][0], size_bytes=half),
            dict(
                c["storages"][0],
                storage_id="s1",
                pointer=c["storages"][0]["pointer"] + half,
                size_bytes=G.ALLOCATED - half,
            ),
        ]
        c["allocations"][6]["storage_id"] = "s1"


def _latent_topk(ev):
    """Decode's MLA latents gain a top-k buffer (every latent, so the allocation keeps one spec)."""
    for r in ev.workers(D):
        for i in G.MLA_LAYERS:
            g(r, 4)["layer_specs"][G.latent(i)]["fields"]["topk_buffer_width"] = 2048


def _ring_slots(ev):
    """Decode's rings change a spec field (workers and the scheduler copy)."""
    for r in ev.workers(D):
        for spec in g(r, 5)["layer_specs"].values():
            spec["fields"]["num_head_slots"] = 4
    g(ev.scheduler(D), 5)["spec_fields"]["num_head_slots"] = 4


CASES = [
    (
        "I-13-unknown-key",
        lambda ev: ev.workers(P)[1]["cache"].__setitem__("passed", True),
        "I-13",
        "runtime observation has missing or unknown keys: missing [], unknown [cache.passed]",
    ),
    (
        "I-13-missing-key",
        lambda ev: ev.scheduler(D)["cache"]["startup"].pop("kv_cache_size_tokens"),
        "I-13",
        "runtime observation has missing or unknown keys: missing [cache.startup.kv_cache_size_tokens], unknown []",
    ),
    (
        "I-13-state-key",
        lambda ev: g(ev.workers(P)[0], 5)["state"].__setitem__("status", "ok"),
        "I-13",
        "runtime observation has missing or unknown keys: missing [], unknown [cache.groups[5].state.status]",
    ),
    (
        "I-15",
        lambda ev: ev.scheduler(P)["binding"]["rank"].__setitem__("tp", 0),
        "I-15",
        "invalid observed scheduler rank: dp=0, tp=0, pp=null",
    ),
    (
        "I-15-worker",
        lambda ev: ev.workers(D)[0]["binding"]["rank"].__setitem__("pp", 1),
        "I-15",
        "invalid observed worker rank: dp=0, tp=0, pp=1",
    ),
    (
        "I-21",
        lambda ev: each(ev.all_records(), lambda r: r["runtime"].__setitem__("framework", "sglang")),
        "I-21",
        "runtime observation currently requires a vLLM source mapping; got framework 'sglang'",
    ),
    (
        "I-26-version",
        lambda ev: ev.edit_launch(lambda l: l["identity"].__setitem__("framework_version", "0.33.0rc1")),
        "I-26",
        "runtime differs from the launch: version '0.33.0', launch '0.33.0rc1'",
    ),
    (
        "I-26-revision",
        lambda ev: ev.workers(D)[2]["runtime"].__setitem__("source_revision", "f" * 40),
        "I-26",
        "runtime observer or source differs across records: runtime.source_revision (prefill worker dp0-tp0-pp0 vs decode worker dp0-tp2-pp0)",
    ),
    (
        "I-27",
        lambda ev: ev.edit_launch(lambda l: l["topology"].__setitem__("moe_tp", 2)),
        "I-27",
        "runtime observation attention and MoE topology sizes disagree",
    ),
    (
        "I-28-unknown",
        lambda ev: ev.workers(P)[0]["settings"]["cache"].__setitem__("swap_space", 4),
        "I-28",
        "runtime settings hold an unknown key: cache.swap_space",
    ),
    (
        "I-28-type",
        lambda ev: ev.workers(P)[0]["settings"]["model"].__setitem__("max_model_len", 1048576.0),
        "I-28",
        "runtime settings are incomplete: model.max_model_len",
    ),
    (
        "I-28-missing",
        lambda ev: ev.scheduler(P)["settings"].pop("kv_transfer"),
        "I-28",
        "runtime settings are incomplete: kv_transfer",
    ),
    (
        "I-28-hybrid-null",
        lambda ev: ev.workers(P)[0]["settings"]["cache"].__setitem__("kv_cache_layout", None),
        "I-28",
        "runtime settings are incomplete: cache.kv_cache_layout",
    ),
    (
        "I-29-tp",
        lambda ev: each(
            ev.phase_records(P), lambda r: r["settings"]["parallel"].__setitem__("tensor_parallel_size", 8)
        ),
        "I-29",
        "runtime memory launch mismatch: parallel.tensor_parallel_size=8, expected 4",
    ),
    (
        "I-30-draft",
        lambda ev: each(
            ev.workers(P), lambda r: g(r, 4)["layer_specs"][G.latent(7)]["fields"].__setitem__("is_draft", True)
        ),
        "I-30",
        "speculative or transferred cache semantics are unsupported",
    ),
    (
        "I-31-offload",
        lambda ev: each(ev.phase_records(D), lambda r: r["settings"]["cache"].__setitem__("cpu_offload_gb", 1.5)),
        "I-31",
        "runtime observation does not support KV offload or block overrides: cache.cpu_offload_gb=1.5",
    ),
    (
        "I-32-nolabel",
        lambda ev: each(ev.all_records(), lambda r: r["settings"]["cache"].__setitem__("kv_cache_dtype", "nvfp4")),
        "I-32",
        "observed KV cache dtype 'nvfp4' has no label",
    ),
    (
        "I-32-label",
        lambda ev: each(ev.all_records(), lambda r: r["settings"]["cache"].__setitem__("kv_cache_dtype", "bfloat16")),
        "I-32",
        "observed KV cache dtype 'bfloat16' maps to 'bfloat16', expected 'fp8'",
    ),
    (
        "I-34-hash",
        lambda ev: each(ev.all_records(), lambda r: r["model"].__setitem__("config_sha256", "0" * 64)),
        "I-34",
        "loaded model configuration hash differs from the staged model-config.json",
    ),
    (
        "I-34-path",
        lambda ev: ev.workers(P)[3]["model"].__setitem__("path", "/models/glm"),
        "I-34",
        "observed model path differs from the selected deployment",
    ),
    (
        "I-34-commit",
        lambda ev: ev.workers(P)[3]["model"].__setitem__("loaded_config_commit", "1" * 40),
        "I-34",
        "observed model revision differs from the selected model",
    ),
    (
        "I-35-sm",
        lambda ev: each(ev.workers(P) + ev.workers(D), lambda r: r["hardware"].__setitem__("sm", 100)),
        "I-35",
        "observed hardware differs from the launch: sm 100, launch 103",
    ),
    (
        "I-35-device",
        lambda ev: ev.workers(D)[0]["hardware"].__setitem__("device_name", " "),
        "I-35",
        "observed hardware evidence is incomplete: hardware.device_name",
    ),
    (
        "I-36-mode",
        lambda ev: each(ev.workers(P), lambda r: r["settings"]["compilation"].__setitem__("cudagraph_mode", "FULL")),
        "I-36",
        "runtime graph settings differ from the reviewed launch: cudagraph_mode",
    ),
    (
        "I-36-sizes",
        lambda ev: each(
            ev.phase_records(P),
            lambda r: r["settings"]["compilation"].__setitem__("cudagraph_capture_sizes", [1, 2, 4]),
        ),
        "I-36",
        "runtime graph settings differ from the reviewed launch: cudagraph_capture_sizes",
    ),
    (
        "I-37",
        lambda ev: ev.workers(P)[1]["settings"]["model"].__setitem__("dtype", "torch.float16"),
        "I-37",
        "effective runtime settings differ across ranks of prefill: model.dtype",
    ),
    (
        "I-38",
        lambda ev: ev.scheduler(P)["settings"]["scheduler"].__setitem__("enable_chunked_prefill", False),
        "I-38",
        "runtime launch settings differ between scheduler and worker: scheduler.enable_chunked_prefill",
    ),
    (
        "I-40-group-id",
        lambda ev: each(ev.workers(P), lambda r: g(r, 2).__setitem__("group_id", 7)),
        "I-40",
        "runtime cache groups are malformed: group_id 7 at position 2",
    ),
    (
        "I-41-unknown-module",
        lambda ev: each(
            ev.workers(P), lambda r: g(r, 5)["layer_specs"][G.ring(7)].__setitem__("class", "mypkg.CircularBufferSpec")
        ),
        "I-41",
        "unsupported runtime cache spec: mypkg.CircularBufferSpec (class unknown to vLLM 0.33.0): language_model.model.layers.7.self_attn.indexer.tail_cache",
    ),
    (
        "I-44-window",
        lambda ev: each(ev.workers(P), lambda r: g(r, 4).__setitem__("sliding_window", 4096)),
        "I-44",
        "cache group 4 geometry contradicts its layer specs: sliding_window 4096, layer specs give null",
    ),
    (
        "I-44-cacheable",
        lambda ev: each(ev.phase_records(P), lambda r: g(r, 5).__setitem__("prefix_cacheable", True)),
        "I-44",
        "cache group 5 geometry contradicts its layer specs: prefix_cacheable true, layer specs give false",
    ),
    (
        "I-44-block",
        lambda ev: each(ev.workers(P), lambda r: g(r, 5).__setitem__("block_size_tokens", 8)),
        "I-44",
        "cache group 5 geometry contradicts its layer specs: block_size_tokens 8, layer specs give 4",
    ),
    (
        "I-46",
        lambda ev: each(
            ev.workers(P),
            lambda r: g(r, 4)["layer_specs"][G.latent(7)]["fields"].__setitem__("attention_chunk_size", 8192),
        ),
        "I-46",
        "unsupported or unresolved extra/chunk cache retention: language_model.model.layers.7.self_attn.attn",
    ),
    (
        "I-47",
        lambda ev: each(
            ev.workers(P),
            lambda r: g(r, 4)["layer_specs"][G.latent(7)]["fields"].__setitem__("dtype", "torch.bfloat16"),
        ),
        "I-47",
        "cache group dtype contradicts requested KV precision: language_model.model.layers.7.self_attn.attn holds 'torch.bfloat16', expected torch.uint8, torch.float8_e4m3fn, torch.float8_e5m2",
    ),
    (
        "I-49",
        lambda ev: g(ev.workers(P)[1], 0)["layer_specs"][G.kda(0)]["fields"].__setitem__("num_heads", 2),
        "I-49",
        "cache geometry differs across ranks of prefill: group 0 layer_specs.language_model.model.layers.0.self_attn.fields.num_heads (prefill worker dp0-tp0-pp0 vs prefill worker dp0-tp1-pp0)",
    ),
    (
        "I-51-startup",
        lambda ev: g(ev.scheduler(D), 4).__setitem__("startup_blocks_per_request", 481),
        "I-51",
        "worker and scheduler cache group geometry disagrees: group 4: startup_blocks_per_request 481 in the scheduler, 482 in the first layer spec language_model.model.layers.3.self_attn.indexer.k_cache",
    ),
    (
        "I-51-field",
        lambda ev: g(ev.scheduler(P), 4)["spec_fields"].__setitem__("tokens_per_state", 8),
        "I-51",
        "worker and scheduler cache group geometry disagrees: group 4: spec_fields.tokens_per_state 8 in the scheduler, 4 in the first layer spec language_model.model.layers.3.self_attn.indexer.k_cache",
    ),
    (
        "I-52",
        lambda ev: each(ev.phase_records(P), lambda r: g(r, 0).__setitem__("role", "hisparse_hot")),
        "I-52",
        "HiSparse placement is unsupported: group 0 (role 'hisparse_hot', host_resident false)",
    ),
    (
        "I-52-placement",
        lambda ev: ev.workers(P)[0]["cache"].__setitem__("placement", "hisparse"),
        "I-52",
        "HiSparse placement is unsupported: group 0 (role 'default', host_resident false)",
    ),
    (
        "I-53-not-state",
        lambda ev: each(ev.workers(P), lambda r: g(r, 4).__setitem__("state", {"blocks_per_request": 1})),
        "I-53",
        "runtime cache group holds state evidence but is not a state group: group 4",
    ),
    (
        "I-59",
        _kda5_alignment,
        "I-59",
        "state evidence of cache group 0 contradicts its layer specs: prefill_checkpoint_alignment 16, layer language_model.model.layers.5.self_attn holds 32",
    ),
    (
        "I-60-ring",
        lambda ev: each(ev.workers(P), lambda r: g(r, 5)["state"].__setitem__("blocks_per_request", 2)),
        "I-60",
        "runtime state group 5 records blocks_per_request 2, but its spec holds 1 between block boundaries",
    ),
    ("I-61-scheduler", lambda ev: g(ev.scheduler(P), 5).__setitem__("startup_blocks_per_request", 2), "I-51", None),
    (
        "I-61-attention",
        lambda ev: [g(r, 4).__setitem__("startup_blocks_per_request", 481) for r in ev.phase_records(P)],
        "I-61",
        "cache group 4 records startup_blocks_per_request 481, but vLLM 0.33.0 reserves 482 (cdiv(1048576, 2176))",
    ),
    (
        "I-63-reserved",
        lambda ev: ev.scheduler(P)["cache"].__setitem__("reserved_block_ids", [1]),
        "I-63",
        "scheduler block pool capacity or reservations are inconsistent: reserved_block_ids [1] lack null_block_id 0",
    ),
    (
        "I-63-watermark",
        lambda ev: ev.scheduler(D)["cache"].__setitem__("watermark_blocks", 1),
        "I-63",
        "scheduler block pool capacity or reservations are inconsistent: watermark_blocks 1",
    ),
    (
        "I-64-device",
        lambda ev: ev.workers(P)[0]["cache"]["storages"][0].__setitem__("device", "cpu"),
        "I-64",
        "physical runtime cache storage accounting is inconsistent: device 'cpu' is not a CUDA device",
    ),
    ("I-66", _two_storages, "I-66", "layer-strided allocations must share one backing storage: s0, s1"),
    (
        "I-67",
        lambda ev: each(ev.workers(P), lambda r: r["cache"]["allocations"][6]["layers"].append(G.kda(0))),
        "I-67",
        "allocation 6 (language_model.model.layers.3.self_attn.indexer.tail_cache) is malformed: its layers belong to two groups",
    ),
    (
        "I-67-specs",
        lambda ev: each(ev.workers(P), lambda r: r["cache"]["allocations"][4]["layers"].append(G.latent(3))),
        "I-67",
        "allocation 4 (language_model.model.layers.3.self_attn.indexer.k_cache) is malformed: its layers have two distinct specs",
    ),
    (
        "I-68",
        lambda ev: each(ev.workers(P), lambda r: r["cache"]["allocations"][6]["layers"].pop()),
        "I-68",
        "allocation plan does not account for every layer and backing storage: language_model.model.layers.43.self_attn.indexer.tail_cache",
    ),
    (
        "I-70-layer",
        lambda ev: each(ev.workers(P), lambda r: r["cache"]["allocations"][6].__setitem__("layer_stride", 4096)),
        "I-70",
        "allocation 6 (language_model.model.layers.3.self_attn.indexer.tail_cache) strides contradict layout BLHNC: layer_stride 4096, block_stride 13516800, expected block_stride 13516800 (the pool page) and layer_stride 2048",
    ),
    (
        "I-77",
        lambda ev: each(ev.workers(P), lambda r: r["cache"]["layer_views"].pop(G.ring(11))),
        "I-77",
        "layer has no tensor views: language_model.model.layers.11.self_attn.indexer.tail_cache",
    ),
    (
        "I-78",
        lambda ev: each(ev.workers(P), lambda r: views(r, G.ring(3))[0].__setitem__("storage_offset_bytes", 2048)),
        "I-78",
        "layer view lies outside its layer page: language_model.model.layers.3.self_attn.indexer.tail_cache",
    ),
    (
        "I-79",
        lambda ev: each(
            ev.workers(P), lambda r: views(r, G.kda(0))[0].__setitem__("stride_bytes", [G.POOL_PAGE, 6, 3])
        ),
        "I-79",
        "layer view shape or strides are malformed: language_model.model.layers.0.self_attn",
    ),
    (
        "I-79-axis",
        lambda ev: each(ev.workers(P), lambda r: views(r, G.kda(0))[1].__setitem__("block_axis", 4)),
        "I-79",
        "layer view shape or strides are malformed: language_model.model.layers.0.self_attn",
    ),
    (
        "I-80-negative",
        lambda ev: each(ev.workers(P), lambda r: views(r, G.latent(3))[0].__setitem__("kernel_block_stride", -1)),
        "I-80",
        "layer view shape or strides are malformed: language_model.model.layers.3.self_attn.attn",
    ),
    (
        "I-81-divide",
        lambda ev: each(ev.workers(P), lambda r: views(r, G.ring(3))[0].__setitem__("kernel_block_size_tokens", 3)),
        "I-81",
        "layer view kernel block contradicts its cache spec: language_model.model.layers.3.self_attn.indexer.tail_cache (kernel block 3 does not divide block 4)",
    ),
    (
        "I-83",
        lambda ev: each(
            ev.workers(P), lambda r: views(r, G.latent(7))[0]["stride_bytes"].__setitem__(0, G.POOL_PAGE * 2)
        ),
        "I-83",
        "layer view block stride contradicts its allocation: language_model.model.layers.7.self_attn.attn",
    ),
    (
        "I-84",
        lambda ev: each(
            ev.workers(P), lambda r: views(r, G.latent(7))[0].__setitem__("stride_bytes", [G.POOL_PAGE, 256, 1])
        ),
        "I-84",
        "physical tensor dimensions overlap: language_model.model.layers.7.self_attn.attn",
    ),
    (
        "I-85",
        lambda ev: each(ev.workers(P), lambda r: views(r, G.ring(3))[0].__setitem__("storage_offset_bytes", 2)),
        "I-85",
        "tensor view extent exceeds its cache spec page: language_model.model.layers.3.self_attn.indexer.tail_cache",
    ),
    (
        "I-86-size",
        lambda ev: each(ev.workers(P), lambda r: views(r, G.kda(0))[0].__setitem__("dtype", "torch.float32")),
        "I-86",
        "layer view element size contradicts its dtype: language_model.model.layers.0.self_attn",
    ),
    (
        "I-86-spec",
        lambda ev: each(ev.workers(P), lambda r: views(r, G.latent(3))[0].__setitem__("dtype", "torch.int8")),
        "I-86",
        "layer view element size contradicts its dtype: language_model.model.layers.3.self_attn.attn",
    ),
    (
        "I-87-divisor",
        lambda ev: each(
            ev.workers(P), lambda r: r["cache"]["model_runner"].__setitem__("kernel_block_sizes", [2176] * 5 + [3])
        ),
        "I-87",
        "model runner kernel_block_sizes must hold one divisor of each group block size: entry 5 is 3 for block size 4",
    ),
    (
        "I-88-missing",
        lambda ev: each(ev.workers(P), lambda r: r["cache"]["attention_groups"][6]["layer_names"].pop()),
        "I-88",
        "attention groups are malformed: language_model.model.layers.43.self_attn.indexer.tail_cache is in no attention group",
    ),
    (
        "I-88-negative",
        lambda ev: each(
            ev.workers(P), lambda r: r["cache"]["attention_groups"][6].__setitem__("kernel_block_stride", -1)
        ),
        "I-88",
        "attention group 6 has a negative kernel_block_stride: -1",
    ),
    (
        "I-88-group",
        lambda ev: each(ev.workers(P), lambda r: r["cache"]["attention_groups"][6].__setitem__("kv_cache_group_id", 4)),
        "I-88",
        "attention groups are malformed: attention group 6 holds language_model.model.layers.3.self_attn.indexer.tail_cache, which is not in cache group 4",
    ),
    (
        "I-92-hash",
        lambda ev: each(ev.phase_records(D), lambda r: r["settings"]["cache"].__setitem__("hash_block_size", 1088)),
        "I-92",
        "runtime prefix-caching evidence contradicts the resolved cache settings: hash_block_size",
    ),
    (
        "I-94",
        _mode_none_with_caching,
        "I-94",
        "runtime Mamba cache mode 'none' contradicts enable_prefix_caching=true for a model with Mamba groups",
    ),
    (
        "I-99",
        lambda ev: ev.scheduler(P)["cache"].__setitem__("cache_hit_alignment_tokens", 1088),
        "I-99",
        "scheduler block sizes contradict its cache groups: cache-hit alignment 1088 is neither the hash block size 2176 nor the scheduler block size 2176",
    ),
    (
        "I-101-len",
        lambda ev: ev.scheduler(D)["cache"]["startup"].__setitem__("max_model_len", 524288),
        "I-101",
        "decode scheduler dp0 records max_model_len 524288, expected 1048576",
    ),
    (
        "I-101-setting",
        lambda ev: each(
            ev.phase_records(P), lambda r: r["settings"]["scheduler"].__setitem__("max_in_flight_tokens", 16384)
        ),
        "I-101",
        "prefill scheduler dp0 records settings.scheduler.max_in_flight_tokens 16384, expected 8192",
    ),
    (
        "I-105",
        lambda ev: ev.workers(D)[2]["hardware"].__setitem__("device_name", "NVIDIA GB300 (MIG)"),
        "I-105",
        "observed hardware differs across phases or ranks: prefill worker dp0-tp0-pp0 and decode worker dp0-tp2-pp0",
    ),
    (
        "I-106",
        lambda ev: each(
            ev.phase_records(D), lambda r: r["settings"]["compilation"].__setitem__("max_cudagraph_capture_size", 128)
        ),
        "I-106",
        "effective runtime settings differ across phases: compilation.max_cudagraph_capture_size (prefill 256, decode 128)",
    ),
    (
        "I-108-attention",
        _latent_topk,
        "I-108",
        "decode: runtime cache group geometry differs from prefill: group 4 layer_specs.language_model.model.layers.3.self_attn.attn.fields.topk_buffer_width 2048, expected null",
    ),
    (
        "I-109-ring",
        _ring_slots,
        "I-109",
        "decode: runtime cache group geometry differs from prefill: group 5 layer_specs.language_model.model.layers.3.self_attn.indexer.tail_cache.fields.num_head_slots 4, expected null",
    ),
]


@pytest.mark.parametrize("name,edit,rule,message", CASES, ids=[c[0] for c in CASES])
def test_mutation_refused(evidence, run_import, name, edit, rule, message):
    edit(evidence)
    refused(run_import(evidence), rule, message)


def test_mutation_suite_size():
    """The acceptance asks for at least 40 edits of the GLM example besides the spec's own cases."""
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) == len(CASES)


# -- stage A: evidence files -----------------------------------------------------------------------


def _write(evidence, tmp_path):
    return evidence.write(tmp_path / "ev")


def _index(folder):
    return json.loads((folder / "observations.json").read_text())


def _put_index(folder, index):
    (folder / "observations.json").write_text(json.dumps(index))


def _imp(folder, services, **kw):
    from fpmcore.importer import import_evidence

    return import_evidence(folder, services, **kw)


def test_i1_missing_index(tmp_path, services):
    """A missing index is named as missing, with its path (fpmcore issue 13 §4)."""
    result = _imp(tmp_path, services)
    assert rules(result) == [("I-1", f"runtime observation index is missing: {tmp_path / 'observations.json'}")]
    assert result.exit_code == 1 and result.results == ()


def test_i1_schema_and_keys(evidence, tmp_path, services):
    folder = _write(evidence, tmp_path)
    index = _index(folder)
    index["schema_version"] = "aisimulate-runtime-observations/v1"
    _put_index(folder, index)
    assert rules(_imp(folder, services)) == [
        ("I-1", "unsupported runtime observation index schema: 'aisimulate-runtime-observations/v1'")
    ]
    index = _index(_write(evidence, tmp_path / "b"))
    index["configurations"][G.CONFIG]["attempts"][0]["phases"]["decode"]["artifacts"][0]["size"] = 1
    _put_index(tmp_path / "b" / "ev", index)
    assert rules(_imp(tmp_path / "b" / "ev", services)) == [
        (
            "I-1",
            "runtime observation index is malformed: configurations.glm53flash-tp4.attempts[0].phases.decode.artifacts[0].size",
        )
    ]


def test_i1_index_symlink(evidence, tmp_path, services):
    folder = _write(evidence, tmp_path)
    (folder / "observations.json").rename(folder / "real.json")
    os.symlink(folder / "real.json", folder / "observations.json")
    assert rules(_imp(folder, services))[0][0] == "I-1"


def test_i2_no_configuration(evidence, tmp_path, services):
    folder = _write(evidence, tmp_path)
    index = _index(folder)
    index["configurations"] = {}
    _put_index(folder, index)
    assert rules(_imp(folder, services)) == [
        ("I-2", "runtime import requires selected configurations with reviewed launch facts")
    ]


def test_i2_bad_launch_file(evidence, tmp_path, services):
    folder = _write(evidence, tmp_path)
    bad = tmp_path / "launch.json"
    bad.write_text('{"launch": NaN}')
    assert rules(_imp(folder, services, launch=bad)) == [
        ("I-2", f"reviewed launch file is not a strict JSON object: {bad}")
    ]


def test_i3_unknown_configuration(evidence, tmp_path, services):
    folder = _write(evidence, tmp_path)
    result = _imp(folder, services, configuration="nope")
    assert rules(result) == [("I-3", "selected configuration has no runtime observation evidence: 'nope'")]


def test_configuration_selection(evidence, tmp_path, services):
    folder = _write(evidence, tmp_path)
    assert _imp(folder, services, configuration=G.CONFIG).complete


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda l: l["topology"].pop("moe_ep"), "runtime observations require complete explicit topology"),
        (lambda l: l["topology"].__setitem__("tp", 0), "runtime observations require complete explicit topology"),
        (
            lambda l: l["topology"].__setitem__("pp", 2),
            "runtime observation allocation supports PP1 and CP1; got pp=2, cp=1",
        ),
        (lambda l: l["identity"].__setitem__("extra", 1), "runtime observation launch is malformed: identity.extra"),
        (
            lambda l: l["collection"].__setitem__("max_num_seqs", True),
            "runtime observation launch is malformed: collection.max_num_seqs",
        ),
        (
            lambda l: l["deployment"].__setitem__("image", "vllm:latest"),
            "runtime observation launch is malformed: deployment.image",
        ),
    ],
)
def test_i5_launch(evidence, run_import, edit, message):
    evidence.edit_launch(edit)
    refused(run_import(evidence), "I-5", message)


def _edit_index(evidence, tmp_path, services, fn):
    folder = _write(evidence, tmp_path)
    index = _index(folder)
    fn(index["configurations"][G.CONFIG])
    _put_index(folder, index)
    return _imp(folder, services)


def test_i6_attempts(evidence, tmp_path, services):
    r = _edit_index(evidence, tmp_path / "a", services, lambda c: c.__setitem__("active_attempt_id", "other"))
    assert rules(r) == [("I-6", "configuration requires an explicit active attempt identity")]
    r = _edit_index(evidence, tmp_path / "b", services, lambda c: c["attempts"].append(copy.deepcopy(c["attempts"][0])))
    assert rules(r) == [("I-6", f"duplicate runtime probe attempt identity: '{G.ATTEMPT}'")]
    r = _edit_index(evidence, tmp_path / "c", services, lambda c: c.__setitem__("attempts", []))
    assert rules(r) == [("I-6", "configuration has no runtime probe attempts")]


def test_i8_phases(evidence, tmp_path, services):
    r = _edit_index(evidence, tmp_path, services, lambda c: c["attempts"][0]["phases"].pop("decode"))
    assert rules(r) == [("I-8", "runtime evidence requires both prefill and decode phases; got prefill")]


def test_i9_hash_mismatch(evidence, tmp_path, services):
    folder = _write(evidence, tmp_path)
    path = folder / evidence.path(D, G.worker_name(1))
    path.write_bytes(path.read_bytes() + b" ")
    result = _imp(folder, services)
    assert ("I-9", f"runtime artifact hash mismatch: {evidence.path(D, G.worker_name(1))}") in rules(result)
    d = result.diagnostics[0]
    assert (d.phase, d.artifact) == ("decode", G.worker_name(1))


def test_i9_paths(evidence, tmp_path, services):
    def dotted(c):
        c["attempts"][0]["phases"]["prefill"]["artifacts"][0]["path"] = (
            "./" + c["attempts"][0]["phases"]["prefill"]["artifacts"][0]["path"]
        )

    r = _edit_index(evidence, tmp_path / "a", services, dotted)
    assert rules(r)[0][0] == "I-9" and "artifact paths must be normalized relative paths: ./" in rules(r)[0][1]

    def duplicate(c):
        arts = c["attempts"][0]["phases"]["decode"]["artifacts"]
        arts[1] = dict(c["attempts"][0]["phases"]["prefill"]["artifacts"][1])

    r = _edit_index(evidence, tmp_path / "b", services, duplicate)
    assert any(m.startswith("duplicate runtime artifact path across ranks or phases: ") for _r, m in rules(r))


def test_i9_symlink(evidence, tmp_path, services):
    folder = _write(evidence, tmp_path)
    rel = evidence.path(P, G.worker_name(0))
    (folder / rel).rename(folder / "elsewhere.json")
    os.symlink(folder / "elsewhere.json", folder / rel)
    assert ("I-9", f"artifact path contains a symlink: {rel}") in rules(_imp(folder, services))


@pytest.mark.parametrize(
    "raw,reason",
    [
        (b"\xff\xfe{}", "not UTF-8 at 1:1"),
        (b'{"a": 1,}', "syntax error at 1:9"),
        (b'{"a": NaN}', "non-finite number NaN at 1:7 (a)"),
        (b'{"a": 1e999}', "non-finite number 1e999 at 1:7 (a)"),
        (b'{"a": {"b": [1, 1e400]}}', "non-finite number 1e400 at 1:17 (a.b[1])"),
        (b'{"a": 1, "b": {"c": 2, "c": 3}}', "duplicate object key 'c' at 1:24 (b.c)"),
        (b'{"a": "\\ud800"}', "lone surrogate \\ud800 in a string at 1:7 (a)"),
        (b'{"a": ' + b"7" * 4301 + b"}", "integer of 4301 digits exceeds the 4300-digit limit at 1:7 (a)"),
        (b"[" * 300 + b"]" * 300, "nesting deeper than 256 levels at 1:257"),
        (b"\xef\xbb\xbf{}", "syntax error at 1:1"),
    ],
)
def test_i10_reasons(evidence, run_import, raw, reason):
    path = evidence.path(D, G.scheduler_name())
    evidence.raw[path] = raw
    assert ("I-10", f"runtime artifact is not strict JSON: {path}: {reason}") in rules(run_import(evidence))


def test_i11_manifest(evidence, run_import):
    evidence.manifests[D]["phase"] = "prefill"
    refused(run_import(evidence), "I-11", "runtime launch manifest of decode differs from its configuration: phase")


def test_i11_manifest_ranks(evidence, run_import):
    evidence.manifests[P]["expected_ranks"]["workers"].pop()
    refused(
        run_import(evidence),
        "I-11",
        "runtime launch manifest of prefill differs from its configuration: expected_ranks",
    )


def test_i11_manifest_schema(evidence, run_import):
    evidence.manifests[P]["status"] = "ok"
    refused(run_import(evidence), "I-11", "unsupported runtime launch manifest schema")


def test_i17_duplicate_rank(evidence, run_import):
    evidence.records[P]["extra/" + G.worker_name(1)] = copy.deepcopy(evidence.records[P][G.worker_name(1)])
    refused(run_import(evidence), "I-17", "duplicate worker rank evidence: prefill worker dp0-tp1-pp0")


def test_i23_versions(run_import):
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.27.0", hybrid=False)
    for r in ev.phase_records(D):
        r["runtime"]["version"] = "0.33.0"
    refused(run_import(ev), "I-23", "runtime records name different vLLM versions: '0.27.0' and '0.33.0'")


def test_i73_i75_layer_outer(run_import):
    """I-73 and I-75 on a layer-outer pool (block-outer pools reach I-70 or I-72 first)."""
    ev = A.AttnEvidence(
        [("FullAttentionSpec", 2, None), ("SlidingWindowSpec", 1, 512)], layout="LBHNC", num_blocks=3000
    )
    half = ev.page // 2
    for w in ev.workers(P):
        w["cache"]["allocations"][1]["offset"] = half
    refused(
        run_import(ev),
        "I-75",
        "aliased pool block byte intervals overlap: model.layers.0.self_attn.attn "
        "block b and model.layers.2.self_attn.attn block b-1",
    )
    ev = A.AttnEvidence(
        [("FullAttentionSpec", 2, None), ("SlidingWindowSpec", 1, 512)], layout="LBHNC", num_blocks=3000
    )
    for w in ev.workers(P):
        a = w["cache"]["allocations"][1]
        a["block_stride"], a["layer_stride"] = 2 * ev.page, 2 * ev.page * 3000
    refused(
        run_import(ev),
        "I-73",
        f"aliased tensors have incompatible pool block ownership: allocation 0 block_stride {ev.page}, allocation 1 block_stride {2 * ev.page}",
    )


def test_i107_page_across_phases(run_import):
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], heads=8, num_blocks=3000)
    other = A.AttnEvidence([("FullAttentionSpec", 4, None)], heads=4, num_blocks=3000)
    ev.records[D] = other.records[D]
    result = run_import(ev)
    refused(result, "I-107", f"physical page cost differs across phases or ranks: {4 * ev.page} and {4 * other.page}")
    # the decode worker contributes only its first failing rule (02 §6.1), so I-108 is not repeated for it
    assert [r for r, _m in rules(result)] == ["I-107"]


def test_i110_profile_validation(evidence, run_import):
    """I-110: a draft that fails 01 (a mutable model revision, P-62)."""
    evidence.edit_launch(lambda l: l["identity"].__setitem__("model_revision", "main"))
    for r in evidence.all_records():
        r["model"]["revision"] = "main"
    refused(
        run_import(evidence),
        "I-110",
        "imported resources fail profile validation: profile: model_revision must be pinned; got 'main'",
    )


def test_i0_never_an_exception(evidence, run_import, services):
    """02 §6.2: an unexpected exception becomes I-0, not a traceback."""

    class Broken:
        def has_runtime(self, pin):
            return True

        def installed(self):
            return "none"

        def classify(self, runtime, spec_class, spec):
            raise RuntimeError("boom")

        def normalize(self, runtime, record):
            return None

        def rules(self, runtime):
            return services.rules(runtime)

        def hybrid_versions(self):
            return services.hybrid_versions()

    result = run_import(evidence, services=Broken())
    assert rules(result) == [("I-0", "import failed unexpectedly: RuntimeError: boom")]
    assert result.results[0].draft is None


@pytest.mark.parametrize("value", [[], {}, "x", 3])
def test_wrong_json_types_never_raise(evidence, run_import, value):
    """Any record value of another JSON type than §3 gives fails with a rule, never a traceback."""
    for key in ("num_blocks", "allocations", "layer_views", "storages"):
        ev = G.Evidence()
        ev.workers(P)[0]["cache"][key] = value
        result = run_import(ev)
        assert not result.complete
        assert all(d.rule != "I-0" for d in result.diagnostics), rules(result)


# -- harmless edits and the valid variants of 02 §13 ------------------------------------------------


def _reorder(ev):
    """§13.5: ``kind`` and ``layer_specs`` keys in another order."""
    for r in ev.workers(P):
        for grp in r["cache"]["groups"]:
            kind = grp.pop("kind")
            specs = grp.pop("layer_specs")
            grp["layer_specs"] = dict(reversed(list(specs.items())))
            grp["kind"] = kind


def _alignment32(ev):
    """§13.4: checkpoint alignment 32 instead of 16."""
    for r in ev.all_records():
        for grp in r["cache"]["groups"][:4]:
            if "state" in grp:
                grp["state"]["prefill_checkpoint_alignment"] = 32
            for spec in grp.get("layer_specs", {}).values():
                spec["fields"]["prefill_checkpoint_alignment"] = 32
            if "spec_fields" in grp:
                grp["spec_fields"]["prefill_checkpoint_alignment"] = 32


def _observer_version(ev):
    for r in ev.all_records():
        r["observer"]["version"] = "1.0.1"


def _pointers(ev):
    for i, r in enumerate(ev.workers(D)):
        r["cache"]["storages"][0]["pointer"] = 139000000000000 + 4096 * i


def _backends(ev):
    for r in ev.workers(D):
        r["cache"]["attention_groups"][5]["backend"] = "TRITON_MLA"


def _engine_log(ev):
    ev.other[ev.path(P, "engine.log")] = b"started\n"


def _graph_downgrade(ev):
    for r in ev.workers(P) + ev.workers(D):
        r["settings"]["compilation"]["cudagraph_mode"] = "PIECEWISE"


HARMLESS = [
    ("reordered-keys", _reorder),
    ("alignment-32", _alignment32),
    ("observer-version", _observer_version),
    ("pointers", _pointers),
    ("backend-names", _backends),
    ("engine-log", _engine_log),
    ("graph-downgrade", _graph_downgrade),
]


@pytest.mark.parametrize("name,edit", HARMLESS, ids=[h[0] for h in HARMLESS])
def test_harmless_edit_accepted(evidence, run_import, name, edit):
    edit(evidence)
    result = run_import(evidence)
    assert result.complete, rules(result)


def test_alignment32_draft(evidence, run_import):
    _alignment32(evidence)
    groups = run_import(evidence).results[0].draft["deployments"][0]["resources"]["cache_groups"]
    assert [g.get("prefill_checkpoint_alignment") for g in groups] == [32, 32, 32, 32, None, None]


def _triton(ev, phase):
    for r in ev.phase_records(phase):
        for grp in r["cache"]["groups"][:4]:
            if "state" in grp:
                grp["state"].update(num_prefill_checkpoint_blocks=0, prefill_checkpoint_alignment=None)
            for spec in grp.get("layer_specs", {}).values():
                spec["fields"].update(num_prefill_checkpoint_blocks=0, prefill_checkpoint_alignment=None)
            if "spec_fields" in grp:
                grp["spec_fields"].update(num_prefill_checkpoint_blocks=0, prefill_checkpoint_alignment=None)
            grp["startup_blocks_per_request"] = 2
    ev.scheduler(phase)["cache"]["startup"].update(
        kv_cache_max_concurrency=27.89613034623218, kv_cache_size_tokens=29251212
    )


def test_variant_triton_both_phases(evidence, run_import):
    """§13.3 / 03 V2: M = 491, concurrency 27.89613034623218, size 29,251,212; checkpoint 0 and no alignment."""
    assert 13697 / 491 == 27.89613034623218 and int(27.89613034623218 * G.L) == 29251212
    _triton(evidence, P)
    _triton(evidence, D)
    result = run_import(evidence)
    assert result.complete, rules(result)
    r = result.results[0]
    assert [s["blocks_per_request"] for s in r.provenance["startup"]] == [491, 491]
    groups = r.draft["deployments"][0]["resources"]["cache_groups"]
    for grp in groups[:4]:
        assert grp["prefill_checkpoint_blocks"] == 0 and "prefill_checkpoint_alignment" not in grp


def decode_without_prefix_caching(ev):
    """§13.2 / 03 V3: decode with prefix caching off (mode none, Mamba block = L)."""
    lcm = 17825792
    for r in ev.phase_records(D):
        c = r["settings"]["cache"]
        c.update(enable_prefix_caching=False, mamba_cache_mode="none", hash_block_size=lcm)
        r["prefix_caching"] = {"enable_prefix_caching": False, "mamba_cache_mode": "none", "hash_block_size": lcm}
        for grp in r["cache"]["groups"][:4]:
            grp["block_size_tokens"] = G.L
            grp["startup_blocks_per_request"] = 1
            if "state" in grp:
                grp["state"]["mamba_cache_mode"] = "none"
            for spec in grp.get("layer_specs", {}).values():
                spec["block_size"] = G.L
                spec["fields"].update(block_size=G.L, mamba_cache_mode="none")
            if "spec_fields" in grp:
                grp["spec_fields"].update(block_size=G.L, mamba_cache_mode="none")
    for r in ev.workers(D):
        r["settings"]["cache"]["mamba_block_size"] = G.L
        r["cache"]["model_runner"]["kernel_block_sizes"] = [G.L] * 4 + [G.B, 4]
        for grp in r["cache"]["groups"][:4]:
            for layer in grp["layer_names"]:
                for v in r["cache"]["layer_views"][layer]:
                    v["kernel_block_size_tokens"] = G.L
    s = ev.scheduler(D)["cache"]
    s.update(block_size=lcm, hash_block_size=lcm, cache_hit_alignment_tokens=lcm, mamba_cache_mode="none")
    s["startup"].update(kv_cache_max_concurrency=28.125256673511295, kv_cache_size_tokens=29491469)


def test_variant_decode_without_prefix_caching(evidence, run_import):
    """§13.2: complete; 12 phase geometry differences; the profile keeps prefill's 2,176 and align."""
    assert 13697 / 487 == 28.125256673511295 and int(28.125256673511295 * G.L) == 29491469
    decode_without_prefix_caching(evidence)
    result = run_import(evidence)
    assert result.complete, rules(result)
    r = result.results[0]
    diffs = r.provenance["phase_geometry_differences"]
    assert len(diffs) == 12
    assert diffs[:3] == [
        {"group": 0, "key": "block_size_tokens", "prefill": 2176, "decode": 1048576},
        {"group": 0, "key": "state.mamba_cache_mode", "prefill": "align", "decode": "none"},
        {"group": 0, "key": "startup_blocks_per_request", "prefill": 3, "decode": 1},
    ]
    assert {d["group"] for d in diffs} == {0, 1, 2, 3}
    assert [s["blocks_per_request_by_group"] for s in r.provenance["startup"]] == [
        [3, 3, 3, 3, 482, 1],
        [1, 1, 1, 1, 482, 1],
    ]
    mem = r.draft["deployments"][0]["resources"]["runtime_memory"]
    assert (mem["mamba_cache_mode"], mem["hash_block_size_tokens"]) == ("align", 2176)
    groups = r.draft["deployments"][0]["resources"]["cache_groups"]
    assert [g["block_size_tokens"] for g in groups] == [2176] * 5 + [4]

"""The negative cases of 02 §12: each edit of the GLM fixture is refused with the named rule and message.

Each case edits the valid evidence of 02 §11, recomputes the index hashes and
expects ``incomplete`` with a diagnostic carrying the rule and (where the
spec prints it in full) the exact message.
"""

from __future__ import annotations

import json

import fpm_import_glm_fixture as G
import pytest

P = "prefill"
PW = lambda ev: ev.workers(P)  # noqa: E731
G0 = "group 0 (language_model.model.layers.0.self_attn and 8 more)"
IDX3 = "language_model.model.layers.3.self_attn.indexer.k_cache"


def all_records(ev):
    return ev.all_records()


def prefill_records(ev):
    return ev.phase_records(P)


def set_version(v, launch_too=False):
    def edit(ev):
        for r in all_records(ev):
            r["runtime"]["version"] = v
        if launch_too:
            ev.edit_launch(lambda l: l["identity"].__setitem__("framework_version", v))

    return edit


def each(select, fn):
    def edit(ev):
        for r in select(ev):
            fn(r)

    return edit


def g(r, i):
    return r["cache"]["groups"][i]


def state0(key, value):
    return each(PW, lambda r: g(r, 0)["state"].__setitem__(key, value))


def sched(fn):
    return lambda ev: fn(ev.scheduler(P))


def _delete_tp3(ev):
    del ev.records[P][G.worker_name(3)]


def _duplicate_key(ev):
    text = G.dumps(ev.scheduler(P)).decode()
    text = text.replace('"num_blocks": 13697,', '"num_blocks": 13697,\n  "num_blocks": 13697,', 1)
    ev.raw[ev.path(P, G.scheduler_name())] = text.encode()


def _rswa(r):
    for name in g(r, 4)["layer_names"]:
        if name.endswith(".attn"):
            spec = g(r, 4)["layer_specs"][name]
            spec["class"] = G.MOD + "RSWASpec"
            spec["fields"]["rswa_window"] = 4096


def _hisparse(r):
    for spec in g(r, 4)["layer_specs"].values():
        spec["class"] = G.MOD + "HiSparseHotSpec"


def _latent_mamba(r):
    for name, spec in g(r, 4)["layer_specs"].items():
        if name.endswith(".attn"):
            spec["class"] = G.MOD + "MambaSpec"


def _kpool(ev):
    for r in PW(ev):
        for spec in g(r, 5)["layer_specs"].values():
            spec["class"] = G.MOD + "KpoolTailSpec"
    g(ev.scheduler(P), 5)["spec_class"] = G.MOD + "KpoolTailSpec"


def _dup_layer(r):
    g(r, 1)["layer_names"].append(G.kda(5))
    g(r, 1)["layer_specs"][G.kda(5)] = G.kda_spec()


def _latent_copy(s):
    spec = G.latent_spec()
    grp = g(s, 4)
    grp["page_size_bytes"] = spec["page_size_bytes"]
    grp["spec_fields"] = spec["fields"]


def _mode_all(ev):
    for r in prefill_records(ev):
        r["settings"]["cache"]["mamba_cache_mode"] = "all"
        r["prefix_caching"]["mamba_cache_mode"] = "all"
        for grp in r["cache"]["groups"][:4]:
            if "state" in grp:
                grp["state"]["mamba_cache_mode"] = "all"
            for spec in grp.get("layer_specs", {}).values():
                spec["fields"]["mamba_cache_mode"] = "all"
            if "spec_fields" in grp:
                grp["spec_fields"]["mamba_cache_mode"] = "all"
    ev.scheduler(P)["cache"]["mamba_cache_mode"] = "all"


def _startup2(ev):
    for r in prefill_records(ev):
        g(r, 0)["startup_blocks_per_request"] = 2


def _indexer_views(fn):
    def edit(ev):
        for r in PW(ev):
            for i in G.MLA_LAYERS:
                for v in r["cache"]["layer_views"][G.indexer(i)]:
                    fn(v)

    return edit


def _stride0(ev):
    _indexer_views(lambda v: v.__setitem__("kernel_block_stride", 0))(ev)
    for r in PW(ev):
        r["cache"]["attention_groups"][4]["kernel_block_stride"] = 0


def _prefix(key, value, select=prefill_records, settings=False):
    def edit(ev):
        for r in select(ev):
            r["prefix_caching"][key] = value
            if settings:
                r["settings"]["cache"][key] = value

    return edit


def _triton_decode(ev):
    for r in ev.phase_records("decode"):
        for grp in r["cache"]["groups"][:4]:
            if "state" in grp:
                grp["state"]["num_prefill_checkpoint_blocks"] = 0
                grp["state"]["prefill_checkpoint_alignment"] = None
            for spec in grp.get("layer_specs", {}).values():
                spec["fields"]["num_prefill_checkpoint_blocks"] = 0
                spec["fields"]["prefill_checkpoint_alignment"] = None
            if "spec_fields" in grp:
                grp["spec_fields"]["num_prefill_checkpoint_blocks"] = 0
                grp["spec_fields"]["prefill_checkpoint_alignment"] = None
            grp["startup_blocks_per_request"] = 2
    st = ev.scheduler("decode")["cache"]["startup"]
    st["kv_cache_max_concurrency"] = 27.89613034623218
    st["kv_cache_size_tokens"] = 29251212


def _strip_hybrid(select):
    def edit(ev):
        for r in select(ev):
            for grp in r["cache"]["groups"]:
                grp.pop("layer_specs", None)
                grp.pop("spec_fields", None)

    return edit


def _startup_concurrency(value):
    return sched(lambda s: s["cache"]["startup"].__setitem__("kv_cache_max_concurrency", value))


def _drop_concurrency(s):
    del s["cache"]["startup"]["kv_cache_max_concurrency"]


def _drop_prefix(s):
    del s["prefix_caching"]


def _drop_checkpoint(r):
    del g(r, 0)["state"]["num_prefill_checkpoint_blocks"]
    del g(r, 0)["state"]["prefill_checkpoint_alignment"]


def _ring_state_removed(r):
    del g(r, 5)["state"]


# (case, edit, rule, expected message or None when the spec abbreviates it)
CASES = [
    (1, set_version("0.31.0"), "I-22", "hybrid cache evidence requires vLLM 0.33.0; the record names vLLM 0.31.0"),
    (2, set_version("0.32.0"), "I-22", "hybrid cache evidence requires vLLM 0.33.0; the record names vLLM 0.32.0"),
    (
        3,
        set_version("0.33.1", launch_too=True),
        "I-22",
        "hybrid cache evidence requires vLLM 0.33.0; the record names vLLM 0.33.1",
    ),
    (
        4,
        set_version("0.33.0.post1"),
        "I-22",
        "hybrid cache evidence requires vLLM 0.33.0; the record names vLLM 0.33.0.post1",
    ),
    (5, set_version("0.33"), "I-22", "hybrid cache evidence requires vLLM 0.33.0; the record names vLLM 0.33"),
    (6, set_version("0.34.0"), "I-22", "hybrid cache evidence requires vLLM 0.33.0; the record names vLLM 0.34.0"),
    (
        7,
        sched(lambda s: s.__setitem__("schema_version", "aisimulate-runtime-observation/v1")),
        "I-12",
        "unsupported runtime observation schema: 'aisimulate-runtime-observation/v1'",
    ),
    (8, _delete_tp3, "I-18", "prefill worker rank evidence is incomplete: missing dp0-tp3-pp0"),
    (
        9,
        lambda ev: ev.records[P][G.worker_name(2)]["binding"]["rank"].__setitem__("tp", 1),
        "I-16",
        "runtime artifact name does not match its binding: runtime-observation-worker-dp0-tp2-pp0.json holds prefill worker dp0-tp1-pp0",
    ),
    (
        10,
        lambda ev: PW(ev)[1]["binding"].__setitem__("phase", "decode"),
        "I-14",
        "runtime observation binding mismatch: phase='decode', expected 'prefill'",
    ),
    (
        11,
        lambda ev: PW(ev)[1].update(unresolved_fields=["cache.groups"], error="hisparse placement"),
        "I-19",
        "runtime observation has unresolved fields: cache.groups: hisparse placement",
    ),
    (
        12,
        lambda ev: PW(ev)[1]["lifecycle"].__setitem__("capture_completed", False),
        "I-20",
        "worker warmup and graph capture completion evidence is missing",
    ),
    (13, _duplicate_key, "I-10", None),
    (
        14,
        each(prefill_records, lambda r: r["settings"]["scheduler"].__setitem__("async_scheduling", True)),
        "I-29",
        "runtime memory launch mismatch: scheduler.async_scheduling=true, expected false",
    ),
    (
        15,
        each(prefill_records, lambda r: r["settings"].__setitem__("speculative", {"num_speculative_tokens": 1})),
        "I-30",
        "speculative or transferred cache semantics are unsupported",
    ),
    (
        16,
        each(prefill_records, lambda r: r["settings"]["cache"].__setitem__("num_gpu_blocks_override", 13697)),
        "I-31",
        "runtime observation does not support KV offload or block overrides: cache.num_gpu_blocks_override=13697",
    ),
    (
        17,
        lambda ev: ev.edit_launch(lambda l: l["precision"].__setitem__("fmha_quant_mode", "bfloat16")),
        "I-33",
        "FMHA precision 'bfloat16' differs from the checkpoint-native 'fp8' for KV-cache dtype 'fp8'",
    ),
    (
        18,
        lambda ev: PW(ev)[1]["settings"]["scheduler"].__setitem__("max_num_seqs", 128),
        "I-29",
        "runtime memory launch mismatch: scheduler.max_num_seqs=128, expected 256",
    ),
    (
        19,
        _kpool,
        "I-41",
        "unsupported runtime cache spec: vllm.v1.kv_cache_interface.KpoolTailSpec (not a vLLM 0.33.0 class): language_model.model.layers.3.self_attn.indexer.tail_cache",
    ),
    (
        20,
        each(PW, _rswa),
        "I-41",
        "unsupported runtime cache spec: vllm.v1.kv_cache_interface.RSWASpec (its manager frees the blocks between the prompt and the decode window, which no cache kind models): language_model.model.layers.3.self_attn.attn",
    ),
    (
        21,
        each(PW, _hisparse),
        "I-41",
        "unsupported runtime cache spec: vllm.v1.kv_cache_interface.HiSparseHotSpec (HiSparse placement uses a host pool that the profile does not model): language_model.model.layers.3.self_attn.indexer.k_cache",
    ),
    (
        22,
        each(PW, _latent_mamba),
        "I-42",
        "uniform cache group 4 mixes cache kinds: attention (language_model.model.layers.3.self_attn.indexer.k_cache) and state (language_model.model.layers.3.self_attn.attn)",
    ),
    (
        23,
        each(PW, lambda r: g(r, 4).__setitem__("kind", "state")),
        "I-43",
        "cache group 4 records kind 'state', but vLLM 0.33.0 classes give 'attention'",
    ),
    (
        24,
        each(PW, lambda r: g(r, 4).__setitem__("page_size_bytes", 13516800)),
        "I-44",
        "cache group 4 geometry contradicts its layer specs: page_size_bytes 13516800, layer specs give 13045120",
    ),
    (
        25,
        each(PW, lambda r: g(r, 4)["layer_specs"][G.latent(3)]["fields"].__setitem__("sliding_window", 4096)),
        "I-45",
        "full-attention cache cannot declare sliding retention: language_model.model.layers.3.self_attn.attn",
    ),
    (
        26,
        each(PW, _dup_layer),
        "I-40",
        "layer appears in more than one cache group: language_model.model.layers.5.self_attn",
    ),
    (
        27,
        sched(lambda s: s["cache"]["groups"].pop()),
        "I-50",
        "worker and scheduler cache group counts disagree: worker 6, scheduler 5",
    ),
    (
        28,
        sched(_latent_copy),
        "I-51",
        "worker and scheduler cache group geometry disagrees: group 4: page_size_bytes 1114112 in the scheduler, 71808 in the first layer spec language_model.model.layers.3.self_attn.indexer.k_cache",
    ),
    (29, each(PW, _drop_checkpoint), "I-54", f"runtime state cache group lacks prefill checkpoint evidence: {G0}"),
    (30, state0("num_prefill_checkpoint_blocks", 2), "I-55", f"mamba prefill checkpoint blocks must be 0 or 1: {G0}"),
    (
        31,
        state0("num_prefill_checkpoint_blocks", True),
        "I-55",
        f"mamba prefill checkpoint blocks must be 0 or 1: {G0}",
    ),
    (32, state0("num_prefill_checkpoint_blocks", 1.0), "I-55", f"mamba prefill checkpoint blocks must be 0 or 1: {G0}"),
    (
        33,
        state0("prefill_checkpoint_alignment", None),
        "I-56",
        f"mamba prefill checkpoint evidence is inconsistent: {G0}",
    ),
    (
        34,
        state0("num_prefill_checkpoint_blocks", 0),
        "I-56",
        f"mamba prefill checkpoint evidence is inconsistent: {G0}",
    ),
    (35, state0("prefill_checkpoint_alignment", 0), "I-56", f"mamba prefill checkpoint evidence is inconsistent: {G0}"),
    (
        36,
        state0("num_speculative_blocks", 1),
        "I-57",
        f"speculative Mamba state blocks are unsupported: {G0} (num_speculative_blocks 1)",
    ),
    (37, _mode_all, "I-58", f"runtime Mamba cache mode 'all' is not supported: {G0}"),
    (
        38,
        state0("blocks_per_request", 2),
        "I-60",
        "runtime state group 0 records blocks_per_request 2, but its spec holds 1 between block boundaries",
    ),
    (
        39,
        each(PW, _ring_state_removed),
        "I-53",
        "runtime state cache group lacks state evidence: group 5 (language_model.model.layers.3.self_attn.indexer.tail_cache and 10 more)",
    ),
    (
        40,
        _startup2,
        "I-61",
        "cache group 0 records startup_blocks_per_request 2, but vLLM 0.33.0 reserves 3 (align mode: 2 + 0 speculative + 1 checkpoint)",
    ),
    (
        41,
        sched(lambda s: s["cache"].__setitem__("free_blocks", 13697)),
        "I-63",
        "scheduler block pool capacity or reservations are inconsistent: free_blocks 13697 of num_blocks 13697",
    ),
    (
        42,
        sched(lambda s: s["cache"].__setitem__("num_blocks", 13696)),
        "I-62",
        "worker and scheduler block counts disagree: worker 13697, scheduler 13696",
    ),
    (
        43,
        lambda ev: PW(ev)[2]["cache"].__setitem__("allocated_cache_bytes", 185139609601),
        "I-64",
        "physical runtime cache storage accounting is inconsistent: storages sum to 185139609600, allocated_cache_bytes 185139609601",
    ),
    (
        44,
        lambda ev: PW(ev)[2]["cache"].__setitem__("available_cache_bytes", 185139609599),
        "I-65",
        "physical cache allocation exceeds its budget or has a non-integral pool page size: allocated 185139609600, available 185139609599, num_blocks 13697",
    ),
    (
        45,
        each(prefill_records, lambda r: r["settings"]["cache"].__setitem__("kv_cache_layout", "BLNHC")),
        "I-69",
        "kv cache layout differs between the resolved settings ('BLNHC') and the cache record ('BLHNC')",
    ),
    (
        46,
        lambda ev: (
            [r["settings"]["cache"].__setitem__("kv_cache_layout", "LHBNC") for r in prefill_records(ev)]
            + [r["cache"].__setitem__("kv_cache_layout", "LHBNC") for r in PW(ev)]
        ),
        "I-69",
        "kv cache layout 'LHBNC' is not supported: pages must be contiguous (LBHNC, LBNHC, BLHNC or BLNHC)",
    ),
    (
        47,
        each(PW, lambda r: r["cache"]["allocations"][5].__setitem__("block_stride", 13516799)),
        "I-70",
        "allocation 5 (language_model.model.layers.3.self_attn.attn) strides contradict layout BLHNC: layer_stride 1114112, block_stride 13516799, expected block_stride 13516800 (the pool page) and layer_stride 1114112",
    ),
    (
        48,
        each(PW, lambda r: r["cache"]["allocations"][0].__setitem__("offset", 3489793)),
        "I-72",
        "allocation 0 (language_model.model.layers.0.self_attn) exceeds its storage: offset + (9 - 1) x 1114112 + (13697 - 1) x 13516800 + 1114112 = 185139609601 > 185139609600",
    ),
    (
        49,
        each(PW, lambda r: r["cache"]["allocations"][5].__setitem__("offset", 789887)),
        "I-74",
        "layers in one cache group cannot alias the same allocation slot: language_model.model.layers.43.self_attn.indexer.k_cache and language_model.model.layers.3.self_attn.attn share bytes of one block",
    ),
    (
        50,
        _indexer_views(lambda v: v["shape"].__setitem__(0, 43827216)),
        "I-82",
        f"kernel tensor block coverage contradicts pool block geometry: {IDX3} holds 43827216 kernel blocks, expected (13697 - 1) x 3200 + 17 = 43827217",
    ),
    (
        51,
        _stride0,
        "I-82",
        f"kernel tensor block coverage contradicts pool block geometry: {IDX3} holds 43827217 kernel blocks, expected 13697 x 17 = 232849",
    ),
    (
        52,
        _indexer_views(lambda v: v.pop("kernel_block_stride")),
        "I-80",
        f"layer view lacks kernel_block_stride: {IDX3}",
    ),
    (
        53,
        _indexer_views(lambda v: v.__setitem__("shape", [43827217, 16, 132])),
        "I-81",
        f"layer view kernel block contradicts its cache spec: {IDX3} (a 128-token kernel block holds 32 states of 4 tokens; the view holds 16)",
    ),
    (
        54,
        each(PW, lambda r: r["cache"]["attention_groups"][4].__setitem__("kernel_block_stride", 3199)),
        "I-89",
        f"attention group 4 contradicts the views of {IDX3}: kernel block 128, kernel_block_stride 3199; the view holds 128, 3200",
    ),
    (
        55,
        each(PW, lambda r: r["cache"]["model_runner"].__setitem__("kernel_block_sizes", [2176] * 5)),
        "I-87",
        "model runner kernel_block_sizes must hold one divisor of each group block size: 5 entries for 6 cache groups",
    ),
    (
        56,
        sched(_drop_prefix),
        "I-90",
        "runtime observation requires complete prefix-caching evidence: prefill scheduler dp0",
    ),
    (
        57,
        sched(lambda s: s["prefix_caching"].__setitem__("enable_prefix_caching", "true")),
        "I-90",
        "runtime observation requires complete prefix-caching evidence: prefill scheduler dp0",
    ),
    (
        58,
        sched(lambda s: s["prefix_caching"].__setitem__("mamba_cache_mode", "auto")),
        "I-90",
        "runtime observation requires complete prefix-caching evidence: prefill scheduler dp0",
    ),
    (
        59,
        lambda ev: PW(ev)[2]["prefix_caching"].__setitem__("hash_block_size", 1088),
        "I-91",
        "runtime prefix-caching evidence differs across ranks of prefill: prefill scheduler dp0 and prefill worker dp0-tp2-pp0",
    ),
    (
        60,
        _prefix("enable_prefix_caching", False),
        "I-92",
        "runtime prefix-caching evidence contradicts the resolved cache settings: enable_prefix_caching",
    ),
    (
        61,
        _prefix("enable_prefix_caching", False, settings=True),
        "I-93",
        "mamba cache mode align requires prefix caching",
    ),
    (
        62,
        sched(lambda s: s["settings"]["cache"].__setitem__("block_size", 4)),
        "I-95",
        "scheduler block sizes contradict its cache groups: block_size 4, expected 2176 (the smallest prefix-cacheable group block)",
    ),
    (
        63,
        sched(lambda s: s["cache"].__setitem__("block_size", 4)),
        "I-96",
        "scheduler block sizes contradict its cache groups: scheduler block size 4, expected lcm(2176, 2176, 2176, 2176, 2176, 4) = 2176",
    ),
    (
        64,
        each(prefill_records, lambda r: r["settings"]["cache"].__setitem__("prefix_match_unit", 1088)),
        "I-97",
        "scheduler block sizes contradict its cache groups: hash block size 2176, expected 1088",
    ),
    (
        65,
        _prefix("hash_block_size", 1088, settings=True),
        "I-98",
        "runtime prefix-caching evidence contradicts the scheduler block sizes",
    ),
    (66, sched(_drop_concurrency), "I-100", "prefill scheduler dp0 lacks a positive kv_cache_max_concurrency"),
    (67, _startup_concurrency(0), "I-100", "prefill scheduler dp0 lacks a positive kv_cache_max_concurrency"),
    (
        68,
        _startup_concurrency(-27.67070707070707),
        "I-100",
        "prefill scheduler dp0 lacks a positive kv_cache_max_concurrency",
    ),
    (69, _startup_concurrency(True), "I-100", "prefill scheduler dp0 lacks a positive kv_cache_max_concurrency"),
    (
        70,
        _startup_concurrency(27.89613034623218),
        "I-103",
        "prefill scheduler dp0 records kv_cache_max_concurrency 27.89613034623218, which gives 491 blocks per request, but its cache groups reserve 495",
    ),
    (
        71,
        _startup_concurrency(28.125256673511295),
        "I-103",
        "prefill scheduler dp0 records kv_cache_max_concurrency 28.125256673511295, which gives 487 blocks per request, but its cache groups reserve 495",
    ),
    (
        72,
        sched(lambda s: s["cache"]["startup"].__setitem__("kv_cache_size_tokens", 29014840)),
        "I-104",
        "prefill scheduler dp0 records kv_cache_size_tokens 29014840, but int(27.67070707070707 x 1048576) = 29014839",
    ),
    (
        73,
        sched(lambda s: s["cache"]["startup"].__setitem__("max_in_flight_tokens", 16384)),
        "I-101",
        "prefill scheduler dp0 records max_in_flight_tokens 16384, expected 8192",
    ),
    (
        74,
        _triton_decode,
        "I-109",
        "decode: runtime cache group geometry differs from prefill: group 0 state.num_prefill_checkpoint_blocks 0, expected 1",
    ),
    (
        75,
        _strip_hybrid(all_records),
        "I-41",
        "unsupported runtime cache spec: vllm.v1.kv_cache_interface.UniformTypeKVCacheSpecs (records without hybrid evidence allow FullAttentionSpec and SlidingWindowSpec): group 0",
    ),
    (
        76,
        _strip_hybrid(lambda ev: [PW(ev)[0]]),
        "I-24",
        "runtime records disagree on hybrid cache evidence: prefill worker dp0-tp1-pp0 holds it, prefill worker dp0-tp0-pp0 does not",
    ),
    (
        79,
        sched(lambda s: s["launch"]["collection"].__setitem__("max_num_seqs", 128)),
        "I-14",
        "runtime observation launch differs from its configuration: collection.max_num_seqs",
    ),
    (
        80,
        lambda ev: PW(ev)[3]["observer"].__setitem__("source_sha256", "e" * 64),
        "I-26",
        "runtime observer or source differs across records: observer.source_sha256 (prefill worker dp0-tp0-pp0 vs prefill worker dp0-tp3-pp0)",
    ),
    (
        81,
        each(lambda ev: ev.workers(P) + ev.workers("decode"), lambda r: r["hardware"].__setitem__("gpu", "gb200")),
        "I-35",
        "observed hardware differs from the launch: gpu 'gb200', launch 'gb300'",
    ),
    (
        82,
        lambda ev: PW(ev)[1]["hardware"].__setitem__("total_memory_bytes", 185139610599),
        "I-35",
        "profiled cache allowance exceeds physical device memory",
    ),
    (
        83,
        lambda ev: ev.edit_launch(lambda l: l["collection"].__setitem__("mamba_cache_mode_override", "align")),
        "I-39",
        "backend policy cannot select the Mamba cache mode for runtime memory observation",
    ),
]


def assert_refused(result, rule: str, message: str | None) -> None:
    assert not result.complete
    assert result.exit_code == 1
    got = [(d.rule, d.message) for d in result.diagnostics]
    if message is None:
        assert any(r == rule for r, _m in got), got
    else:
        assert (rule, message) in got, got


@pytest.mark.parametrize("case,edit,rule,message", CASES, ids=[f"case{c[0]}-{c[2]}" for c in CASES])
def test_negative_case(evidence, run_import, case, edit, rule, message):
    edit(evidence)
    result = run_import(evidence)
    assert_refused(result, rule, message)
    for r in result.results:
        assert r.draft is None
        assert set(r.provenance) == {"observations_index"}


def test_case13_duplicate_key_message(evidence, run_import):
    """Case 13 (I-10): the message names the artifact path, the duplicate key, its line:column and key path
    (fpmcore issue 13 §6)."""
    _duplicate_key(evidence)
    result = run_import(evidence)
    path = evidence.path(P, G.scheduler_name())
    message = (
        f"runtime artifact is not strict JSON: {path}: duplicate object key 'num_blocks' at 163:3 (cache.num_blocks)"
    )
    assert ("I-10", message) in [(d.rule, d.message) for d in result.diagnostics]
    d = next(d for d in result.diagnostics if d.rule == "I-10")
    assert (d.phase, d.artifact) == ("prefill", G.scheduler_name())


def test_case77_reviewed_launch_differs(evidence, run_import, tmp_path):
    """Case 77 (I-4): ``--launch`` with another ``collection.max_num_seqs``."""
    launch = G.launch()
    launch["collection"]["max_num_seqs"] = 128
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(launch))
    result = run_import(evidence, launch=path)
    assert_refused(
        result, "I-4", "runtime observation launch differs from the reviewed launch: collection.max_num_seqs"
    )


def test_reviewed_launch_equal_is_accepted(evidence, run_import, tmp_path):
    path = tmp_path / "launch.json"
    path.write_text(json.dumps({"launch": G.launch()}))
    assert run_import(evidence, launch=path).complete


def test_case78_launch_needs_one_configuration(evidence, services, tmp_path):
    """Case 78 (I-2): two configurations, ``--launch`` and no ``--configuration``."""
    from fpmcore.importer import import_evidence

    folder = evidence.write(tmp_path / "ev")
    index = json.loads((folder / "observations.json").read_text())
    index["configurations"]["glm53flash-tp4-b"] = index["configurations"]["glm53flash-tp4"]
    (folder / "observations.json").write_text(json.dumps(index))
    launch = tmp_path / "launch.json"
    launch.write_text(json.dumps(G.launch()))
    result = import_evidence(folder, services, launch=launch)
    assert [(d.rule, d.message, d.configuration) for d in result.diagnostics] == [
        ("I-2", "a reviewed launch needs exactly one selected configuration; 2 are selected", None)
    ]


def test_every_case_of_the_spec_is_here():
    """02 §12 lists 83 cases: 81 in the table above, 77 and 78 in their own tests."""
    assert sorted([c[0] for c in CASES] + [77, 78]) == list(range(1, 84))

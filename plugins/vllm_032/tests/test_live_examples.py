"""The recorded live-probe examples (``examples/probes/live/``), imported without an engine.

``tools/regen_live_probes.py`` wrote them with ``fpm probe --live`` on the
vLLM 0.32.0 CPU engine.  Here the default suite imports them as they are:

* each imports ``complete`` with tensor-level evidence, every stage run (H and
  I on the engine's real strides, views and storage), the CPU engine's
  exemptions named in notes and nothing else accepted;
* the profile's numbers are those the engine reported in the same folder
  (``engine-report.json``): ``num_blocks``, groups, block sizes, the pool page,
  ``kv_cache_max_concurrency``, ``kv_cache_size_tokens``;
* each exemption comes from one field of the plugin's runtime rules: without
  it the import refuses the record with the rule 02 writes;
* the exemptions stay narrow: what the rules do not say is refused as 02 says.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import attrs
import pytest

from fpmcore.importer import HostServices, import_evidence
from fpmcore.testing import make_host

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = {
    name: ROOT / "examples" / "probes" / "live" / name
    for name in ("tiny-llama", "tiny-qwen3-next", "tiny-granite-hybrid")
}
NOTES = {"I-20", "I-31", "I-35", "I-64"}


def _import(folder: Path, *plugins: object) -> Any:
    host = make_host(*plugins) if plugins else make_host(entry_points=("vllm_027", "vllm_032", "vllm_033"))
    (result,) = import_evidence(folder, HostServices(host)).results
    return result


def _engine(folder: Path, phase: str) -> dict[str, Any]:
    (report,) = folder.glob(f"*/{phase}/engine-report.json")
    return json.loads(report.read_text())


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_example_imports_complete_at_tensor_level(name):
    folder = EXAMPLES[name]
    assert (folder / "observations.json").is_file(), f"{folder} is missing: run tools/regen_live_probes.py"
    r = _import(folder)
    assert (r.status, r.evidence, r.diagnostics) == ("complete", "tensor", ())
    float32 = {"I-32", "I-33", "I-47"} if name != "tiny-qwen3-next" else set()
    assert {n.rule for n in r.notes} == NOTES | float32
    assert r.provenance["runtime"]["version"] == "0.32.0"
    assert {a["path"].rsplit("/", 1)[-1] for a in r.provenance["runtime_artifacts"]} == {
        "engine-report.json",
        "model-description.json",
        "model-config.json",
    }


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_profile_numbers_are_those_the_engine_reported(name):
    folder = EXAMPLES[name]
    r = _import(folder)
    res = r.draft["deployments"][0]["resources"]
    for phase in ("prefill", "decode"):
        engine = _engine(folder, phase)["engine"]
        (storage,) = engine["storages"]  # all groups alias one storage (README D-L7)
        pool_page = storage["size_bytes"] // engine["num_blocks"]
        assert storage["size_bytes"] == engine["num_blocks"] * pool_page
        assert [(g["block_size_tokens"], g["page_size_bytes"]) for g in res["cache_groups"]] == [
            (g["block_size"], pool_page) for g in engine["groups"]
        ]
        assert res["runtime_memory"]["kv_cache_bytes"] == (engine["num_blocks"] - 1) * pool_page
        startup = next(s for s in r.provenance["startup"] if s["phase"] == phase)
        cc = engine["cache_config"]
        assert (startup["num_blocks"], startup["kv_cache_max_concurrency"], startup["kv_cache_size_tokens"]) == (
            engine["num_blocks"],
            cc["kv_cache_max_concurrency"],
            cc["kv_cache_size_tokens"],
        )
        assert res["runtime_memory"]["hash_block_size_tokens"] == engine["hash_block_size"]
    if name == "tiny-llama":  # 268,435,456 B of 4 layers x 131,072 B pages: 512 blocks, 16 per request
        assert (engine["num_blocks"], cc["kv_cache_max_concurrency"], pool_page) == (512, 32.0, 524288)
    elif name == "tiny-granite-hybrid":  # caching off: 3 Mamba groups of 2,048 (1 block each) + cdiv(2048, 128) = 19
        assert (engine["num_blocks"], cc["kv_cache_max_concurrency"], pool_page) == (2048, 2048 / 19, 131072)
        assert [(g["kind"], g["block_size_tokens"]) for g in res["cache_groups"]] == [
            ("state", 2048), ("state", 2048), ("state", 2048), ("attention", 128)]  # fmt: skip
        assert (engine["block_size"], engine["hash_block_size"]) == (2048, 2048)  # the lcm (README D-L13)
    else:  # 268,435,456 // 196,608 = 1365 blocks; align mode 3 x 2 + cdiv(2048, 384) = 12 per request
        assert (engine["num_blocks"], cc["kv_cache_max_concurrency"], pool_page) == (1365, 113.75, 196608)
        assert [g["kind"] for g in res["cache_groups"]] == ["state", "state", "state", "attention"]


def _strict_plugin(**rules: Any) -> Any:
    """The vllm_032 plugin with some of its platform rules put back to 02 as written."""
    from fpmcore_vllm032 import plugin

    return attrs.evolve(plugin, plugin_id="vllm_032_strict", rules_from=attrs.evolve(plugin.rules, **rules))


@pytest.mark.parametrize(("rules", "rule", "message"), [
    ({"graph_capture": True}, "I-20", "worker warmup and graph capture completion evidence is missing"),
    ({"kv_cache_sizing": frozenset()}, "I-31",
     "runtime observation does not support KV offload or block overrides: cache.kv_cache_memory_bytes=268435456"),
    ({"model_dtype_labels": {"torch.bfloat16": "bfloat16", "torch.float16": "half"}}, "I-32",
     "observed KV cache dtype 'auto' has no label"),
    ({"absent_hardware": frozenset()}, "I-35", "observed hardware evidence is incomplete: hardware.sm"),
    ({"storage_devices": ("cuda:",)}, "I-64",
     "physical runtime cache storage accounting is inconsistent: device 'cpu' is not a CUDA device"),
])  # fmt: skip
def test_each_exemption_is_a_runtime_rule(rules, rule, message):
    r = _import(EXAMPLES["tiny-llama"], _strict_plugin(**rules))
    assert r.status == "incomplete"
    assert {(d.rule, d.message) for d in r.diagnostics} == {(rule, message)}


def _edited(tmp_path: Path, name: str, edit: Any) -> Path:
    """A copy of an example whose worker records ``edit(record)`` changed, the index re-hashed."""
    folder = tmp_path / name
    shutil.copytree(EXAMPLES[name], folder)
    index_path = folder / "observations.json"
    index = json.loads(index_path.read_text())
    for config in index["configurations"].values():
        for attempt in config["attempts"]:
            for phase in attempt["phases"].values():
                for ref in phase["artifacts"]:
                    path = folder / ref["path"]
                    if "worker" in path.name:
                        record = json.loads(path.read_text())
                        edit(record)
                        path.write_text(json.dumps(record, indent=1))
                        ref["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    index_path.write_text(json.dumps(index, indent=1))
    return folder


@pytest.mark.parametrize(("edit", "rule", "message"), [
    (lambda r: r["hardware"].update(device_name=None), "I-35", "observed hardware evidence is incomplete: hardware.device_name"),
    (lambda r: r["hardware"].update(sm=0), "I-35", "observed hardware evidence is incomplete: hardware.sm"),
    (lambda r: [s.update(device="mps:0") for s in r["cache"]["storages"]], "I-64",
     "physical runtime cache storage accounting is inconsistent: device 'mps:0' is not a device of vLLM 0.32.0 (cuda:, cpu)"),
    (lambda r: r["lifecycle"].update(warmup_completed=False), "I-20",
     "worker warmup and graph capture completion evidence is missing"),
    (lambda r: r["settings"]["cache"].update(kv_cache_memory_bytes=0), "I-31",
     "runtime observation does not support KV offload or block overrides: cache.kv_cache_memory_bytes=0"),
    (lambda r: r["settings"]["cache"].update(cpu_offload_gb=1), "I-31",
     "runtime observation does not support KV offload or block overrides: cache.cpu_offload_gb=1"),
])  # fmt: skip
def test_what_the_rules_do_not_say_is_still_refused(tmp_path, edit, rule, message):
    r = _import(_edited(tmp_path, "tiny-qwen3-next", edit))
    assert r.status == "incomplete"
    assert (rule, message) in {(d.rule, d.message) for d in r.diagnostics}


def test_the_layer_views_are_the_engines_tensors():
    """The hybrid's Gated DeltaNet layers bind a (conv, ssm) pair of views into the one storage (README D-L5)."""
    (worker,) = EXAMPLES["tiny-qwen3-next"].glob("*/prefill/runtime-observation-worker-dp0-tp0-pp0.json")
    cache = json.loads(worker.read_text())["cache"]
    conv, ssm = cache["layer_views"]["model.layers.0.linear_attn"]
    assert (conv["shape"], conv["stride_bytes"], conv["storage_offset_bytes"]) == (
        [1365, 3, 1024],
        [196608, 2048, 2],
        0,
    )
    assert (ssm["shape"], ssm["stride_bytes"], ssm["storage_offset_bytes"]) == (
        [1365, 4, 128, 128],
        [196608, 32768, 256, 2],
        6144,
    )
    (attn,) = cache["layer_views"]["model.layers.3.self_attn.attn"]
    assert (attn["shape"], attn["dtype"]) == ([1365, 2, 384, 128], "torch.bfloat16")
    assert cache["model_runner"]["kernel_block_sizes"] == [384, 384, 384, 384]
    assert [a["offset"] for a in cache["allocations"]] == [0, 0, 0, 0]
    assert cache["allocated_cache_bytes"] == 1365 * 196608 == cache["storages"][0]["size_bytes"]

"""``fpm probe --live`` on the running vLLM 0.32.0 CPU engine, and ``fpm import`` of what it writes.

For the tiny plain model (float32) and the tiny hybrid (bfloat16, the CPU
Gated DeltaNet kernel needs it, README D-L8), with prefix caching on and off:

* the probe writes tensor-level evidence of both phases and shuts the engine
  down (no child process, no engine thread);
* ``fpm import`` makes it a ``complete`` profile with every stage run, H and I
  on the real tensors, the CPU engine's exemptions named in notes;
* the profile's numbers are the engine's own: ``num_blocks``, groups, block
  sizes, the pool page, ``kv_cache_max_concurrency``, ``kv_cache_size_tokens``;
* each layer's recorded views hold what the phase's forwards wrote in the
  blocks the request held;
* ``fpm probe --dry-run`` of the engine's own description (its
  ``model-description.json``) plans the same groups, pages, ``num_blocks``
  and concurrency.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fpmcore.testing import run_fpm
from plugins.vllm_032.tests.cpu_state import cpu_keeps_ssm_state_in_float32, gdn_hybrid_numbers

pytestmark = pytest.mark.live

#: (kind, caching) -> the probe's options; 0.25 GiB of KV cache
PROBES = {
    ("llama", "on"): ["--dtype", "float32", "--max-model-len", "2048", "--kv-cache-space", "0.25"],
    ("qwen3-next", "on"): ["--dtype", "bfloat16", "--max-model-len", "2048", "--kv-cache-space", "0.25"],
    ("qwen3-next", "off"): ["--dtype", "bfloat16", "--max-model-len", "2048", "--kv-cache-space", "0.25"],
    # multi-head latent attention: the CPU engine runs it without prefix caching (README §9)
    ("deepseek-v2", "off"): ["--dtype", "float32", "--max-model-len", "2048", "--kv-cache-space", "0.25"],
}

#: The notes every CPU engine's import carries (runtime rules of vllm_032), and the float32 ones.
NOTES = {"I-20", "I-31", "I-35", "I-64"}
FLOAT32_NOTES = {"I-32", "I-33", "I-47"}


@pytest.fixture(scope="module", params=sorted(PROBES), ids=lambda p: f"{p[0]}-caching-{p[1]}")
def probed(request: pytest.FixtureRequest, model_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    kind, caching = request.param
    out = tmp_path_factory.mktemp("live") / "evidence"
    res = run_fpm("probe", "--live", str(model_dirs[kind]), "-o", str(out), "--caching", caching, "--json",
                  *PROBES[request.param])  # fmt: skip
    assert res.exit_code == 0, res.stderr[-3000:]
    summary = res.json()
    imported = run_fpm("import", str(out), "--json")
    return {"kind": kind, "caching": caching, "out": out, "summary": summary, "import": imported}


def _result(probed: dict[str, Any]) -> dict[str, Any]:
    imported = probed["import"]
    assert imported.exit_code == 0, imported.stdout[-3000:]
    return imported.json()["results"][0]


def test_the_probe_writes_both_phases_and_shuts_the_engine_down(probed):
    s = probed["summary"]
    assert (s["mode"], s["runtime"], s["plugin"]) == ("live", "vllm==0.32.0", "vllm_032")
    assert s["shutdown"] == {"children": [], "non_daemon_threads": []}
    index = json.loads((probed["out"] / "observations.json").read_text())
    (config,) = index["configurations"].values()
    (attempt,) = config["attempts"]
    assert set(attempt["phases"]) == {"prefill", "decode"}
    for phase in attempt["phases"].values():
        kinds = sorted(a["kind"] for a in phase["artifacts"])
        assert kinds.count("observation") == 2 and "engine_report" in kinds
    assert not [p for p in probed["out"].parent.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_the_import_is_complete_at_tensor_level_and_names_the_cpu_exemptions(probed):
    r = _result(probed)
    assert (r["status"], r["evidence"], r["diagnostics"]) == ("complete", "tensor", [])
    rules = {n["rule"] for n in r["notes"]}
    assert rules == NOTES | (FLOAT32_NOTES if probed["kind"] in ("llama", "deepseek-v2") else set())
    assert all("runtime rule" in n["message"] for n in r["notes"])
    assert r["provenance"]["runtime_rule_notes"] == r["notes"]
    assert r["provenance"]["runtime"]["version"] == "0.32.0"


def test_the_profile_numbers_are_the_engines_own(probed):
    r = _result(probed)
    res = r["draft"]["deployments"][0]["resources"]
    for phase, engine in probed["summary"]["phases"].items():
        storage = sum(st["size_bytes"] for st in engine["storages"])
        assert len(engine["storages"]) == 1  # every group aliases one storage, counted once (README D-L7)
        pool_page = storage // engine["num_blocks"]
        assert storage == engine["num_blocks"] * pool_page
        # groups: one profile group per engine group, in order, with its block size and the pool page
        assert [g["block_size_tokens"] for g in res["cache_groups"]] == [g["block_size"] for g in engine["groups"]]
        assert [g["kind"] for g in res["cache_groups"]] == [
            "state" if g["class"] == "MambaSpec" else "attention" for g in engine["groups"]
        ]
        assert {g["page_size_bytes"] for g in res["cache_groups"]} == {pool_page}
        # the usable pool: every block but vLLM's null block (03 C-11)
        assert res["runtime_memory"]["kv_cache_bytes"] == (engine["num_blocks"] - 1) * pool_page
        startup = next(s for s in r["provenance"]["startup"] if s["phase"] == phase)
        assert startup["num_blocks"] == engine["num_blocks"]
        assert startup["kv_cache_max_concurrency"] == engine["cache_config"]["kv_cache_max_concurrency"]
        assert startup["kv_cache_size_tokens"] == engine["cache_config"]["kv_cache_size_tokens"]
        assert res["runtime_memory"]["hash_block_size_tokens"] == engine["hash_block_size"]
        assert res["runtime_memory"]["enable_prefix_caching"] is (probed["caching"] == "on")


def test_the_phase_forwards_wrote_into_the_recorded_views(probed):
    for phase in ("prefill", "decode"):
        (report,) = probed["out"].glob(f"*/{phase}/engine-report.json")
        data = json.loads(report.read_text())
        assert data["steps"] and all(s["scheduled_tokens"] > 0 for s in data["steps"])
        tokens = sum(s["scheduled_tokens"] for s in data["steps"])
        assert tokens == data["request"]["prompt_tokens"] + data["request"]["output_tokens"] - 1
        for name, layer in data["layers"].items():
            assert layer["blocks"] and all(layer["views_written"]), name


def test_the_engine_numbers_of_the_plain_and_hybrid_models(probed, model_dirs):
    """The numbers of 0.25 GiB at max_model_len 2048 (README §5 gives them at 1 GiB), on this machine's CPU.

    The hybrid's follow from its ``config.json`` and whether the CPU keeps the SSM state in float32
    (:func:`gdn_hybrid_numbers`, README D-L14).
    """
    engine = probed["summary"]["phases"]["prefill"]
    groups = [(g["class"], g["block_size"], g["page_size_bytes"]) for g in engine["groups"]]
    cc = engine["cache_config"]
    if probed["kind"] == "llama":
        assert groups == [("FullAttentionSpec", 128, 131072)]
        assert (engine["num_blocks"], cc["kv_cache_max_concurrency"], cc["kv_cache_size_tokens"]) == (512, 32.0, 65536)
        return
    if probed["kind"] == "deepseek-v2":
        # one MLA group of four layers; the CPU MLA kernel's 16-token block (platforms/cpu.py:273-280) of a
        # 576-wide float32 latent: 36,864 B a layer, 147,456 B a pool block; 1820 = 268,435,456 // 147,456, and
        # a request of 2,048 tokens holds 128 blocks
        assert groups == [("MLAAttentionSpec", 16, 16 * 576 * 4)]
        assert (engine["num_blocks"], cc["kv_cache_max_concurrency"]) == (1820, 1820 / 128)
        assert (engine["block_size"], engine["hash_block_size"]) == (16, 16)
        return
    ssm_float32 = cpu_keeps_ssm_state_in_float32()
    config = json.loads((model_dirs[probed["kind"]] / "config.json").read_text())
    expected = gdn_hybrid_numbers(config, probed["caching"] == "on", ssm_float32)
    assert groups == expected["groups"]
    assert (engine["num_blocks"], cc["kv_cache_max_concurrency"]) == (
        expected["num_blocks"],
        expected["kv_cache_max_concurrency"],
    )
    assert (engine["block_size"], engine["hash_block_size"]) == (expected["block_size"], expected["hash_block_size"])
    dtypes = {tuple(g["dtypes"]) for g in engine["groups"] if g["class"] == "MambaSpec"}
    assert dtypes == {("torch.bfloat16", "torch.float32" if ssm_float32 else "torch.bfloat16")}


def test_the_dry_probe_of_the_engines_description_plans_the_same(probed, tmp_path):
    """The dry probe and the live probe of one model and settings: same groups, pages, num_blocks, concurrency."""
    description = probed["out"] / "model-description.json"
    dry = tmp_path / "dry"
    res = run_fpm("probe", "--dry-run", str(description), "-o", str(dry), "--caching", probed["caching"], "--json")
    assert res.exit_code == 0, res.stderr[-3000:]
    planned = res.json()["phases"]["prefill"]
    engine = probed["summary"]["phases"]["prefill"]
    assert [(g["spec_class"], g["block_size"], g["group_page_bytes"]) for g in planned["groups"]] == [
        (g["class"], g["block_size"], g["page_size_bytes"]) for g in engine["groups"]
    ]
    assert planned["num_blocks"] == engine["num_blocks"]
    assert planned["pool_page_bytes"] * planned["num_blocks"] == engine["storages"][0]["size_bytes"]
    assert planned["kv_cache_max_concurrency"] == engine["cache_config"]["kv_cache_max_concurrency"]
    assert planned["kv_cache_size_tokens"] == engine["cache_config"]["kv_cache_size_tokens"]
    assert (planned["scheduler_block_size"], planned["hash_block_size"]) == (
        engine["block_size"],
        engine["hash_block_size"],
    )
    dry_import = run_fpm("import", str(dry), "--json").json()["results"][0]
    live_import = _result(probed)
    assert (dry_import["status"], dry_import["evidence"]) == ("complete", "layout")
    dry_res = dry_import["draft"]["deployments"][0]["resources"]
    live_res = live_import["draft"]["deployments"][0]["resources"]
    assert dry_res["cache_groups"] == live_res["cache_groups"]
    assert dry_res["runtime_memory"]["kv_cache_bytes"] == live_res["runtime_memory"]["kv_cache_bytes"]
    assert [s["kv_cache_max_concurrency"] for s in dry_import["provenance"]["startup"]] == [
        s["kv_cache_max_concurrency"] for s in live_import["provenance"]["startup"]
    ]

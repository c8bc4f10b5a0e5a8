"""The embedded probe examples (``examples/probes/``) import ``complete`` as layout-level evidence.

The examples are *dry* probes written by ``tools/regen_probes.py`` with the
real vLLM 0.33.0 (``vllm-0.27.0-plain``: the real vLLM 0.27.0): vLLM planned the cache but
allocated no tensor, so every worker says ``lifecycle.measurement:
"cache_planned"`` and lists the tensor evidence in ``unresolved_fields``.
The import accepts exactly that (``fpmcore.importer``: I-19 and I-20 for dry
records, I-113 [beyond reference], fpmcore issue 3) and runs every other rule,
so each number below is one vLLM computed and the import reproduced: groups,
pages, pool page, block counts, ``kv_cache_bytes`` (03 C-11: free blocks x
pool page) and the startup concurrency of the provenance (C-5 to C-7).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fpmcore.testing import make_host

ROOT = Path(__file__).parents[2] / "examples" / "probes"
#: The committed examples, named here so that a moved or missing folder fails its tests (never skips them).
EXAMPLES = sorted(["gdn-hybrid-tp4", "glm53flash-tp4", "glm53flash-tp4-no-checkpoint",
                   "plain-dense-tp4", "sliding-window", "vllm-0.27.0-plain"])  # fmt: skip


@pytest.fixture(scope="module")
def cli_host():
    """The installed ``fpm`` commands with exactly the two runtime plugins."""
    return make_host(entry_points=("vllm_027", "vllm_033"))


@pytest.fixture(scope="module")
def imported(cli_host):
    """``fpm import <example> --json`` of every example, run once: name -> (exit code, document)."""
    from fpmcore.testing import run_fpm

    out = {}
    for name in EXAMPLES:
        res = run_fpm("import", str(ROOT / name), "--json", host=cli_host)
        out[name] = (res.exit_code, json.loads(res.stdout))
    return out


def _profile(imported, name: str) -> tuple[dict, dict, dict]:
    """(resources, runtime memory, provenance) of an example's profile."""
    code, doc = imported[name]
    assert code == 0 and doc["status"] == "complete", doc["diagnostics"]
    res = doc["profile"]["deployments"][0]["resources"]
    mem = res["runtime_memory"]
    return res, mem, json.loads(mem["provenance"])


def test_the_six_examples_are_present():
    assert sorted(p.parent.name for p in ROOT.glob("*/observations.json")) == EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_imports_complete_as_layout_evidence(imported, name, run_fpm):
    """``fpm import --json``: exit 0, ``complete``, no diagnostics, and the result says it is a dry run."""
    code, doc = imported[name]
    assert code == 0, doc["diagnostics"]
    assert {"schema", "status", "diagnostics", "profile"} <= set(doc)
    assert (doc["status"], doc["diagnostics"], doc["evidence"]) == ("complete", [], "layout")
    (result,) = doc["results"]
    assert (result["status"], result["evidence"]) == ("complete", "layout")
    _res, _mem, prov = _profile(imported, name)
    assert prov["evidence"] == "layout"
    assert "dry run" in doc["profile"]["provenance"]
    assert "layout-level" in doc["profile"]["deployments"][0]["resources"]["provenance"]


def test_human_output_names_the_layout_level(cli_host, run_fpm):
    res = run_fpm("import", str(ROOT / "glm53flash-tp4"), host=cli_host)
    assert res.exit_code == 0
    assert "glm53flash-tp4: complete" in res.stdout
    assert "evidence: layout-level (a dry run: the cache was planned, no tensors were allocated)" in res.stdout


def _groups(res: dict) -> list[tuple]:
    return [
        (
            g["kind"],
            g["num_layers"],
            g["block_size_tokens"],
            g["page_size_bytes"],
            g["sliding_window"],
            g.get("blocks_per_request"),
            g.get("prefill_checkpoint_blocks"),
            g.get("prefill_checkpoint_alignment"),
        )
        for g in res["cache_groups"]
    ]


def _startup(prov: dict) -> set[tuple]:
    return {
        (s["phase"], s["num_blocks"], s["blocks_per_request"], s["kv_cache_max_concurrency"], s["kv_cache_size_tokens"])
        for s in prov["startup"]
    }


def _capacities(prov: dict) -> set[tuple]:
    return {(c["free_blocks"], c["pool_page_bytes"], c["bytes"]) for c in prov["rank_capacities"]}


GLM_PAGE = 13_516_800


def test_glm_example(imported):
    """02 §11 computed by vLLM: 6 groups (5 state, 1 attention of 22 layers), checkpoint 1/16 on the 4 KDA groups."""
    res, mem, prov = _profile(imported, "glm53flash-tp4")
    kda = ("state", None, 2176, GLM_PAGE, None, 1, 1, 16)
    assert _groups(res) == [
        kda[:1] + (9,) + kda[2:],
        kda[:1] + (9,) + kda[2:],
        kda[:1] + (8,) + kda[2:],
        kda[:1] + (8,) + kda[2:],
        ("attention", 22, 2176, GLM_PAGE, None, None, None, None),
        ("state", 11, 4, GLM_PAGE, None, 1, None, None),  # the ring: no checkpoint fields
    ]
    assert "prefill_checkpoint_blocks" not in res["cache_groups"][5]
    assert mem["kv_cache_bytes"] == 185_126_092_800 == 13_696 * GLM_PAGE
    assert (mem["enable_prefix_caching"], mem["mamba_cache_mode"], mem["hash_block_size_tokens"]) == (
        True,
        "align",
        2176,
    )
    assert (mem["max_model_len"], mem["gpu_memory_utilization"]) == (1_048_576, 0.9)
    assert _startup(prov) == {(p, 13_697, 495, 27.67070707070707, 29_014_839) for p in ("prefill", "decode")}
    assert _capacities(prov) == {(13_696, GLM_PAGE, 185_126_092_800)}
    assert len(prov["rank_capacities"]) == 8  # 4 TP ranks x 2 phases
    assert [s["blocks_per_request_by_group"] for s in prov["startup"]] == [[3, 3, 3, 3, 482, 1]] * 2


def test_glm_no_checkpoint_example(imported):
    """02 §13 variant 3 computed by vLLM: checkpoint 0, startup 2 blocks per KDA group, 27.89613034623218."""
    res, mem, prov = _profile(imported, "glm53flash-tp4-no-checkpoint")
    assert [g[:2] + g[5:] for g in _groups(res)] == [
        ("state", 9, 1, 0, None),
        ("state", 9, 1, 0, None),
        ("state", 8, 1, 0, None),
        ("state", 8, 1, 0, None),
        ("attention", 22, None, None, None),
        ("state", 11, 1, None, None),
    ]
    assert {g["page_size_bytes"] for g in res["cache_groups"]} == {GLM_PAGE}
    assert mem["kv_cache_bytes"] == 185_126_092_800
    assert _startup(prov) == {(p, 13_697, 491, 27.89613034623218, 29_251_212) for p in ("prefill", "decode")}
    assert [s["blocks_per_request_by_group"] for s in prov["startup"]] == [[2, 2, 2, 2, 482, 1]] * 2


def test_plain_dense_example(imported):
    """02 §8 plain dense model: 62 full-attention layers, 16-token blocks, 397.203125."""
    res, mem, prov = _profile(imported, "plain-dense-tp4")
    assert _groups(res) == [("attention", 62, 16, 1_015_808, None, None, None, None)]
    assert mem["kv_cache_bytes"] == 206_581_825_536 == 203_367 * 1_015_808
    assert (mem["enable_prefix_caching"], mem["mamba_cache_mode"], mem["hash_block_size_tokens"]) == (True, "none", 16)
    assert _startup(prov) == {(p, 203_368, 512, 397.203125, 3_253_888) for p in ("prefill", "decode")}


def test_sliding_window_example(imported):
    """12 sliding-window (128) + 12 full layers: the window reserves cdiv(min(W - 1 + T, L), B) + 1 = 521 blocks."""
    res, mem, prov = _profile(imported, "sliding-window")
    assert _groups(res) == [
        ("attention", 12, 16, 393_216, 128, None, None, None),
        ("attention", 12, 16, 393_216, None, None, None, None),
    ]
    assert mem["kv_cache_bytes"] == 29_999_235_072 == 76_292 * 393_216
    assert _startup(prov) == {(p, 76_293, 8192 + 521, 8.756226328474693, 1_147_696) for p in ("prefill", "decode")}
    assert [s["blocks_per_request_by_group"] for s in prov["startup"]] == [[521, 8192]] * 2


def test_gdn_hybrid_example(imported):
    """Qwen3-Next-shaped GDN hybrid: 3 Mamba groups (checkpoint 0) and one attention group, 544-token blocks."""
    res, mem, prov = _profile(imported, "gdn-hybrid-tp4")
    assert _groups(res) == [("state", 12, 544, 6_684_672, None, 1, 0, None)] * 3 + [
        ("attention", 12, 544, 6_684_672, None, None, None, None)
    ]
    assert mem["kv_cache_bytes"] == 59_988_246_528 == 8_974 * 6_684_672
    assert (mem["enable_prefix_caching"], mem["mamba_cache_mode"], mem["hash_block_size_tokens"]) == (
        True,
        "align",
        544,
    )
    assert _startup(prov) == {(p, 8_975, 488, 18.391393442622952, 4_821_193) for p in ("prefill", "decode")}


def test_vllm_027_plain_example(imported):
    """A vLLM 0.27.0 record planned by vLLM 0.27.0 (02 §3.14): one group, no prefix-caching evidence, no
    startup check; 9,536 blocks = 20,000,000,000 // (32 layers x 65,536), vLLM 0.27.0's get_num_blocks."""
    code, doc = imported["vllm-0.27.0-plain"]
    res, mem, prov = _profile(imported, "vllm-0.27.0-plain")
    assert doc["profile"]["deployments"][0]["backend_version"] == "0.27.0"
    assert _groups(res) == [("attention", 32, 16, 2_097_152, None, None, None, None)]
    assert mem["kv_cache_bytes"] == 19_996_344_320 == 9_535 * 2_097_152
    assert "enable_prefix_caching" not in mem and "hash_block_size_tokens" not in mem
    assert prov["startup"] == [] and prov["prefix_caching"] is None
    assert _capacities(prov) == {(9_535, 2_097_152, 19_996_344_320)}

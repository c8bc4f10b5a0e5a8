"""The GLM-5.3-Flash TP 4 fixture (02 §11) imports ``complete`` with the numbers vLLM itself computes.

``data/oracle_glm53flash_tp4.expected.json`` is the output of the real vLLM
0.33.0 planning code (``tools/vllm_oracle.py config
data/oracle_glm53flash_tp4.json --caching both --json``) for the layer specs of
02 §11.2; the tests compare the import with it.  ``test_oracle_rerun`` re-runs
the oracle when vLLM is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import fpm_import_glm_fixture as G
import pytest

HERE = Path(__file__).parent
ORACLE = json.loads((HERE / "data" / "oracle_glm53flash_tp4.expected.json").read_text())
ORACLE_ON = next(o for o in ORACLE if o["enable_prefix_caching"])
ORACLE_OFF = next(o for o in ORACLE if not o["enable_prefix_caching"])
EXAMPLE = Path(__file__).parents[2] / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"


@pytest.fixture
def glm(evidence, run_import):
    result = run_import(evidence)
    assert result.complete, [d.render() for d in result.diagnostics]
    return result.results[0]


def test_glm_is_complete_with_six_groups(glm):
    """02 §8 / 01 §10: 5 state groups (4 with checkpoint 1/16, the ring without) and 1 attention group."""
    groups = glm.draft["deployments"][0]["resources"]["cache_groups"]
    assert [g["kind"] for g in groups] == ["state"] * 4 + ["attention", "state"]
    assert [g["num_layers"] for g in groups] == [9, 9, 8, 8, 22, 11]
    assert [g["block_size_tokens"] for g in groups] == [2176] * 5 + [4]
    assert {g["page_size_bytes"] for g in groups} == {13516800}
    for g in groups[:4]:
        assert (g["blocks_per_request"], g["prefill_checkpoint_blocks"], g["prefill_checkpoint_alignment"]) == (
            1,
            1,
            16,
        )
    assert groups[5]["blocks_per_request"] == 1
    assert "prefill_checkpoint_blocks" not in groups[5] and "prefill_checkpoint_alignment" not in groups[5]
    assert "blocks_per_request" not in groups[4]
    assert all(g["sliding_window"] is None for g in groups)


def test_glm_numbers_equal_vllm(glm):
    """Pool page, block counts, concurrency and size tokens equal vLLM 0.33.0's own (oracle) values."""
    assert ORACLE_ON["bytes_per_block"] == 13516800
    assert ORACLE_ON["num_blocks"] == 13697
    assert ORACLE_ON["kv_cache_max_concurrency"] == 27.67070707070707
    assert ORACLE_ON["kv_cache_size_tokens"] == 29014839
    prov = glm.provenance
    for cap in prov["rank_capacities"]:
        assert cap["pool_page_bytes"] == ORACLE_ON["bytes_per_block"]
        assert cap["free_blocks"] == ORACLE_ON["usable_blocks"] == 13696
        assert cap["bytes"] == 185126092800
    assert len(prov["rank_capacities"]) == 8
    for st in prov["startup"]:
        assert st["num_blocks"] == ORACLE_ON["num_blocks"]
        assert st["blocks_per_request_by_group"] == [
            g["blocks_per_request_at_max_model_len"] for g in ORACLE_ON["groups"]
        ]
        assert st["blocks_per_request_by_group"] == [3, 3, 3, 3, 482, 1]
        assert st["blocks_per_request"] == 495
        assert st["kv_cache_max_concurrency"] == ORACLE_ON["kv_cache_max_concurrency"] == 13697 / 495
        assert st["kv_cache_size_tokens"] == ORACLE_ON["kv_cache_size_tokens"]
        assert st["max_in_flight_tokens"] == ORACLE_ON["max_in_flight_tokens"] == 8192
    mem = glm.draft["deployments"][0]["resources"]["runtime_memory"]
    assert mem["kv_cache_bytes"] == 13696 * 13516800 == 185126092800
    assert (mem["enable_prefix_caching"], mem["mamba_cache_mode"], mem["hash_block_size_tokens"]) == (
        True,
        "align",
        ORACLE_ON["hash_block_size"],
    )
    assert ORACLE_ON["scheduler_block_size"] == ORACLE_ON["cache_hit_alignment_tokens"] == 2176


def test_glm_allocations_equal_vllm(evidence):
    """The fixture's KVCacheTensor strides and offsets are the ones vLLM planned (02 §11.3)."""
    allocs = evidence.workers()[0]["cache"]["allocations"]
    assert [
        {
            "num_layers": len(a["layers"]),
            "first_layer": a["layers"][0],
            "size": a["size"],
            "layer_stride": a["layer_stride"],
            "block_stride": a["block_stride"],
            "offset": a["offset"],
        }
        for a in allocs
    ] == ORACLE_ON["kv_cache_tensors"]
    group_pages = [g["page_size_bytes"] for g in evidence.workers()[0]["cache"]["groups"]]
    assert group_pages == [g["group_page_size_bytes"] for g in ORACLE_ON["groups"]]
    assert group_pages == [10027008, 10027008, 8912896, 8912896, 13045120, 22528]


def test_glm_draft_is_the_example_profile(glm):
    """02 §13.1: the draft equals 01 §10 except the runtime memory's provenance string."""
    example = json.loads(EXAMPLE.read_text())
    draft = json.loads(json.dumps(glm.draft))
    example["deployments"][0]["resources"]["runtime_memory"].pop("provenance")
    prov = draft["deployments"][0]["resources"]["runtime_memory"].pop("provenance")
    assert draft == example
    parsed = json.loads(prov)
    assert parsed == json.loads(json.dumps(glm.provenance))
    assert prov == json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_glm_provenance(glm):
    """02 §9.3."""
    p = glm.provenance
    assert p["source"] == "runtime_observations"
    assert p["schema"] == "fpmcore-runtime-observation/v1"
    assert (p["configuration"], p["attempt_id"]) == (G.CONFIG, G.ATTEMPT)
    assert p["runtime"] == {"framework": "vllm", "version": "0.33.0", "source_revision": "4ba787ec" + "0" * 32}
    assert p["observer"] == {"plugin": "fpmcore-vllm033", "version": "1.0.0", "source_sha256": "c" * 64}
    assert p["phase_geometry_differences"] == []
    assert p["prefix_caching"]["prefill"] == {
        "enable_prefix_caching": True,
        "mamba_cache_mode": "align",
        "hash_block_size": 2176,
    }
    assert len(p["artifacts"]) == 10 and len(p["launch_artifacts"]) == 2
    assert p["observations_index"]["path"] == "observations.json"
    assert [(r["phase"], r["tp"]) for r in p["rank_capacities"]] == [
        (ph, t) for ph in ("prefill", "decode") for t in range(4)
    ]


def test_glm_profile_validates(glm):
    """I-110 passes: the draft is a valid FpmModelProfile (01)."""
    from fpmcore.documents.profile import from_data

    profile = from_data(glm.draft)
    res = profile.deployments[0].resources
    assert res.runtime_memory.kv_cache_bytes // res.cache_groups[0].page_size_bytes == 13696


@pytest.mark.real
def test_oracle_rerun(tmp_path):
    """Re-run the real vLLM 0.33.0 planning on the fixture specs and compare with the stored output."""
    # The env's own interpreter has vLLM 0.33.0 (tox -e vllm033-real); ORACLE_PY names another one.
    py = Path(os.environ.get("ORACLE_PY", sys.executable))
    script = Path(__file__).resolve().parents[2] / "tools" / "vllm_oracle.py"
    assert script.exists(), script
    proc = subprocess.run(
        [
            str(py),
            str(script),
            "config",
            str(HERE / "data" / "oracle_glm53flash_tp4.json"),
            "--caching",
            "both",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    fresh = json.loads(proc.stdout)
    for key in (
        "bytes_per_block",
        "num_blocks",
        "kv_cache_max_concurrency",
        "kv_cache_size_tokens",
        "scheduler_block_size",
        "hash_block_size",
        "kv_cache_tensors",
    ):
        assert [o[key] for o in fresh] == [o[key] for o in ORACLE], key

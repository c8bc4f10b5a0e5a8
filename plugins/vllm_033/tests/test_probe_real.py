"""``fpm probe --dry-run`` against the real vLLM 0.33.0 on CPU.

For 28 layer-spec descriptions (14 MODEL.json files of ``tools/probe_models``,
each with prefix caching on and off: plain, windowed, MLA, Mamba ``none`` and
``align``, prefill checkpoint 0 and 1, CircularBuffer, mixed page sizes), the
records the dry probe writes must hold exactly what vLLM's own objects hold
(num_blocks, groups, pages, startup reservation, concurrency), and satisfy
the capacity identities of 03 (C-5 to C-9).  The embedded examples must
regenerate to the same bytes.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from fpmcore.probe.dry_run import ModelJsonError
from fpmcore_vllm_support import dryprobe
from tests.support.tools import load_tool

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "tools" / "probe_models"
CASES = [(p.name, caching) for p in sorted(MODELS.glob("*.json")) for caching in (True, False)]
TP = {"glm53flash_tp4.json": 4, "glm53flash_tp4_triton.json": 4, "plain_dense_62.json": 4, "gdn_hybrid.json": 2}


def _records(out: Path):
    index = json.loads((out / "observations.json").read_text())
    (conf,) = index["configurations"].values()
    phases = conf["attempts"][0]["phases"]
    return {
        phase: [json.loads((out / a["path"]).read_text()) for a in entry["artifacts"] if a["kind"] == "observation"]
        for phase, entry in phases.items()
    }


def _vllm_plan(model_file: Path, tp: int, caching: bool):
    from fpmcore_vllm033 import probe

    model = json.loads(model_file.read_text())
    with tempfile.TemporaryDirectory() as d:
        Path(d, "config.json").write_bytes(dryprobe.stub_config_bytes())
        return probe.plan(model, tp=tp, caching=caching, model_dir=d)


def test_at_least_twenty_descriptions():
    assert len(CASES) >= 20


@pytest.mark.parametrize(
    ("model", "caching"), CASES, ids=[f"{m[:-5]}-caching-{'on' if c else 'off'}" for m, c in CASES]
)
def test_dry_probe_records_reproduce_vllm(tmp_path, model, caching):
    from fpmcore_vllm033 import plugin

    tp = TP.get(model, 1)
    summary = plugin.dry_probe(MODELS / model, tmp_path / "ev", tp=tp, caching=caching)
    p = _vllm_plan(MODELS / model, tp, caching)

    from vllm.utils.math_utils import cdiv
    from vllm.v1.core.kv_cache_planning import _pool_bytes_per_block
    from vllm.v1.core.kv_cache_utils import get_max_concurrency_for_kv_cache_config

    vc, sc = p.vllm_config, p.scheduler_config
    pool_page = _pool_bytes_per_block(vc, p.worker_configs[0].kv_cache_groups)
    concurrency = get_max_concurrency_for_kv_cache_config(vc, sc)
    available = json.loads((MODELS / model).read_text())["available_memory_bytes"]
    for phase, records in _records(tmp_path / "ev").items():
        workers = [r for r in records if r["binding"]["kind"] == "worker"]
        (sched,) = [r for r in records if r["binding"]["kind"] == "scheduler"]
        assert [w["binding"]["rank"]["tp"] for w in workers] == list(range(tp))
        assert summary["phases"][phase]["num_blocks"] == sc.num_blocks
        for rank, w in enumerate(workers):
            cfg, c = p.worker_configs[rank], w["cache"]
            assert c["num_blocks"] == cfg.num_blocks == sc.num_blocks
            assert c["num_blocks"] == available // pool_page  # C-9
            assert len(c["groups"]) == len(cfg.kv_cache_groups)
            for g, vg in zip(c["groups"], cfg.kv_cache_groups, strict=True):
                spec = vg.kv_cache_spec
                assert g["layer_names"] == list(vg.layer_names)
                assert g["spec_class"] == f"{type(spec).__module__}.{type(spec).__qualname__}"
                assert (g["block_size_tokens"], g["page_size_bytes"]) == (spec.block_size, spec.page_size_bytes)
                assert g["startup_blocks_per_request"] == cdiv(spec.max_memory_usage_bytes(vc), spec.page_size_bytes)
                pages = [s["page_size_bytes"] for s in g["layer_specs"].values()]
                if g["spec_class"].endswith("UniformTypeKVCacheSpecs"):  # I-44: the sum of the layer pages
                    assert g["page_size_bytes"] == sum(pages)
                else:  # I-44: every layer holds the group spec
                    assert set(pages) == {g["page_size_bytes"]}
                assert {s["block_size"] for s in g["layer_specs"].values()} == {g["block_size_tokens"]}
                assert g["page_size_bytes"] <= pool_page or c["kv_cache_layout"].startswith("L")
            for a, t in zip(c["allocations"], cfg.kv_cache_tensors, strict=True):
                assert (a["size"], a["layers"], a["layer_stride"], a["block_stride"], a["offset"]) == (
                    t.size,
                    list(t.layers),
                    t.layer_stride,
                    t.block_stride,
                    t.offset,
                )
                if c["kv_cache_layout"].startswith("B"):  # block-outer: one block of every layer per pool page
                    assert (a["size"], a["block_stride"]) == (pool_page * c["num_blocks"], pool_page)
            assert w["prefix_caching"]["enable_prefix_caching"] is caching
        s = sched["cache"]
        assert (s["num_blocks"], s["free_blocks"], s["reserved_block_ids"]) == (sc.num_blocks, sc.num_blocks - 1, [0])
        assert (s["block_size"], s["hash_block_size"]) == (p.block_size, p.hash_block_size)
        assert s["startup"]["kv_cache_max_concurrency"] == concurrency == vc.cache_config.kv_cache_max_concurrency
        m = sum(g["startup_blocks_per_request"] for g in s["groups"])
        assert s["startup"]["kv_cache_max_concurrency"] == s["num_blocks"] / m  # C-5, C-6 exactly
        assert s["startup"]["kv_cache_size_tokens"] == int(s["num_blocks"] / m * s["startup"]["max_model_len"])  # C-7
        for g, vg in zip(s["groups"], sc.kv_cache_groups, strict=True):
            assert (g["page_size_bytes"], g["block_size_tokens"]) == (
                vg.kv_cache_spec.page_size_bytes,
                vg.kv_cache_spec.block_size,
            )
        mode = sched["prefix_caching"]["mamba_cache_mode"]
        if any(g["spec_class"].endswith(".MambaSpec") for g in s["groups"]):
            assert mode == ("align" if caching else "none")  # I-94: vLLM derives the mode


def test_glm_decode_without_caching_matches_02_section_13_variant_2(tmp_path):
    """02 §13.2: without prefix caching the KDA groups take max_model_len blocks, 28.125256673511295."""
    from fpmcore_vllm033 import plugin

    plugin.dry_probe(MODELS / "glm53flash_tp4.json", tmp_path / "ev", tp=4, caching=False)
    sched = [r for r in _records(tmp_path / "ev")["decode"] if r["binding"]["kind"] == "scheduler"][0]
    c = sched["cache"]
    assert (c["block_size"], c["hash_block_size"]) == (17825792, 17825792)
    assert [g["startup_blocks_per_request"] for g in c["groups"]] == [1, 1, 1, 1, 482, 1]
    assert c["startup"]["kv_cache_max_concurrency"] == 28.125256673511295
    assert c["startup"]["kv_cache_size_tokens"] == 29491469
    assert sched["prefix_caching"] == {
        "enable_prefix_caching": False,
        "mamba_cache_mode": "none",
        "hash_block_size": 17825792,
    }


def test_existing_evidence_is_never_overwritten(tmp_path):
    """02 §2.3: an existing file is a failure."""
    from fpmcore_vllm033 import plugin

    plugin.dry_probe(MODELS / "plain_llama8b.json", tmp_path / "ev", tp=1, caching=True)
    before = (tmp_path / "ev" / "observations.json").read_bytes()
    with pytest.raises(FileExistsError):
        plugin.dry_probe(MODELS / "plain_llama8b.json", tmp_path / "ev", tp=1, caching=True)
    assert (tmp_path / "ev" / "observations.json").read_bytes() == before


def test_bad_model_json_names_the_key(tmp_path):
    from fpmcore_vllm033 import plugin

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"max_model_len": 4096, "available_memory_bytes": 1e9, "layers": []}))
    with pytest.raises(ModelJsonError, match="available_memory_bytes"):
        plugin.dry_probe(bad, tmp_path / "ev")
    bad.write_text(json.dumps({"max_model_len": 4096, "available_memory_bytes": 10**9,
                               "layers": [{"name": "x", "spec": {"type": "NoSuchSpec"}}]}))  # fmt: skip
    with pytest.raises(ModelJsonError, match="NoSuchSpec"):
        plugin.dry_probe(bad, tmp_path / "ev2")
    assert not (tmp_path / "ev2").exists()  # nothing is written unless every phase was planned


def test_embedded_examples_regenerate_to_the_same_bytes(tmp_path):
    """examples/probes is what tools/regen_probes.py writes with the installed vLLM 0.33.0.

    The vLLM 0.27.0 example is checked by the ``vllm027-real`` env, which has that release.
    """
    regen = load_tool("regen_probes")
    names = regen.planned_here()
    assert names == [n for n, ex in regen.EXAMPLE_SET.items() if ex.runtime == "vllm_033"] and len(names) == 5
    for name in names:
        fresh = tmp_path / name
        regen.generate(name, fresh)
        assert regen.differences(regen.EXAMPLES / name, fresh) == [], name

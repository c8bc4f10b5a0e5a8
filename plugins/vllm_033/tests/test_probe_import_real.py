"""Dry probe + ``fpm import`` against the real vLLM 0.33.0 on CPU (fpmcore issue 3).

For every MODEL.json of ``tools/probe_models`` with prefix caching on and off
(28 layer-spec descriptions: plain, windowed, MLA, Mamba ``none``/``align``,
checkpoint 0/1, CircularBuffer, mixed page sizes), ``fpm probe --dry-run``
writes the evidence and ``fpm import`` turns it into a profile ``complete``
as layout-level evidence.  The profile and the provenance of its runtime
memory must hold exactly vLLM's own numbers, read from vLLM's objects here:
groups (kind, layers, block size, window, checkpoint), the pool page
(``_pool_bytes_per_block``), ``kv_cache_bytes`` (free blocks x pool page, 03
C-11), the block count, the startup reservation per group and
``kv_cache_max_concurrency`` (``get_max_concurrency_for_kv_cache_config``),
``kv_cache_size_tokens`` and the hash block size.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from fpmcore_vllm_support import dryprobe

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "tools" / "probe_models"
CASES = [(p.name, caching) for p in sorted(MODELS.glob("*.json")) for caching in (True, False)]
#: TP size of each description (the shapes of a MODEL.json are one rank of it); default 1
TP = {"glm53flash_tp4.json": 4, "glm53flash_tp4_triton.json": 4, "plain_dense_62.json": 4, "gdn_hybrid.json": 2}


@pytest.fixture(scope="module")
def cli_host():
    from fpmcore.testing import make_host

    return make_host(entry_points=("vllm_027", "vllm_033"))


def _vllm_plan(model_file: Path, tp: int, caching: bool):
    from fpmcore_vllm033 import probe

    model = json.loads(model_file.read_text())
    with tempfile.TemporaryDirectory() as d:
        Path(d, "config.json").write_bytes(dryprobe.stub_config_bytes())
        return probe.plan(model, tp=tp, caching=caching, model_dir=d)


def _kind(group) -> str:
    """vLLM's own type of a group's layers: Mamba and circular-buffer specs hold state, the rest attention."""
    from vllm.v1.kv_cache_interface import CircularBufferSpec, MambaSpec, UniformTypeKVCacheSpecs

    spec = group.kv_cache_spec
    layer = spec.kv_cache_specs[group.layer_names[0]] if isinstance(spec, UniformTypeKVCacheSpecs) else spec
    return "state" if isinstance(layer, (MambaSpec, CircularBufferSpec)) else "attention"


def test_twenty_eight_descriptions():
    assert len(CASES) == 28


@pytest.mark.parametrize(
    ("model", "caching"), CASES, ids=[f"{m[:-5]}-caching-{'on' if c else 'off'}" for m, c in CASES]
)
def test_dry_probe_imports_vllms_numbers(tmp_path, cli_host, model, caching):
    from vllm.utils.math_utils import cdiv
    from vllm.v1.core.kv_cache_planning import _pool_bytes_per_block
    from vllm.v1.core.kv_cache_utils import get_max_concurrency_for_kv_cache_config
    from vllm.v1.kv_cache_interface import MambaSpec, UniformTypeKVCacheSpecs, get_kv_cache_spec_sliding_window

    from fpmcore.testing import run_fpm

    tp = TP.get(model, 1)
    out = tmp_path / "ev"
    res = run_fpm("probe", "--dry-run", str(MODELS / model), "-o", str(out), "--tp", str(tp),
                  "--caching", "on" if caching else "off", host=cli_host)  # fmt: skip
    assert res.exit_code == 0, res.stderr
    res = run_fpm("import", str(out), "--json", host=cli_host)
    doc = json.loads(res.stdout)
    assert (res.exit_code, doc["status"], doc["evidence"]) == (0, "complete", "layout"), doc["diagnostics"]
    dep = doc["profile"]["deployments"][0]
    resources, mem = dep["resources"], dep["resources"]["runtime_memory"]
    prov = json.loads(mem["provenance"])
    assert (dep["tp"], prov["evidence"]) == (tp, "layout")

    p = _vllm_plan(MODELS / model, tp, caching)
    vc, sc = p.vllm_config, p.scheduler_config
    pool_page = _pool_bytes_per_block(vc, p.worker_configs[0].kv_cache_groups)
    free = p.scheduler.kv_cache_manager.block_pool.get_num_free_blocks()
    concurrency = get_max_concurrency_for_kv_cache_config(vc, sc)
    assert concurrency == vc.cache_config.kv_cache_max_concurrency

    # groups: kind, layers, block size, window, state counts and checkpoint, the pool page as their page
    groups = resources["cache_groups"]
    assert len(groups) == len(sc.kv_cache_groups)
    for g, vg in zip(groups, p.worker_configs[0].kv_cache_groups, strict=True):
        spec = vg.kv_cache_spec
        layer = spec.kv_cache_specs[vg.layer_names[0]] if isinstance(spec, UniformTypeKVCacheSpecs) else spec
        assert (g["kind"], g["num_layers"], g["block_size_tokens"]) == (_kind(vg), len(vg.layer_names), spec.block_size)
        assert g["page_size_bytes"] == pool_page
        assert g["sliding_window"] == (None if g["kind"] == "state" else get_kv_cache_spec_sliding_window(spec))
        if isinstance(layer, MambaSpec):
            assert g["blocks_per_request"] == 1 + layer.num_speculative_blocks
            assert g["prefill_checkpoint_blocks"] == layer.num_prefill_checkpoint_blocks
            assert g.get("prefill_checkpoint_alignment") == (
                layer.prefill_checkpoint_alignment if layer.num_prefill_checkpoint_blocks == 1 else None
            )
        else:
            assert "prefill_checkpoint_blocks" not in g
    # pool, capacity and startup: every phase and rank
    assert mem["kv_cache_bytes"] == free * pool_page
    assert len(prov["rank_capacities"]) == 2 * tp
    for cap in prov["rank_capacities"]:
        assert (cap["free_blocks"], cap["pool_page_bytes"], cap["bytes"]) == (free, pool_page, free * pool_page)
    terms = [
        cdiv(g.kv_cache_spec.max_memory_usage_bytes(vc), g.kv_cache_spec.page_size_bytes) for g in sc.kv_cache_groups
    ]
    assert [s["phase"] for s in prov["startup"]] == ["prefill", "decode"]
    for s in prov["startup"]:
        assert (s["num_blocks"], s["blocks_per_request_by_group"], s["blocks_per_request"]) == (
            sc.num_blocks,
            terms,
            sum(terms),
        )
        assert s["kv_cache_max_concurrency"] == concurrency
        assert s["kv_cache_size_tokens"] == vc.cache_config.kv_cache_size_tokens
    assert (mem["enable_prefix_caching"], mem["hash_block_size_tokens"]) == (
        bool(vc.cache_config.enable_prefix_caching),
        p.hash_block_size,
    )
    assert mem["mamba_cache_mode"] == vc.cache_config.mamba_cache_mode
    assert mem["max_model_len"] == vc.model_config.max_model_len

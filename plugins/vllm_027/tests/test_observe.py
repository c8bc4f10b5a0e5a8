"""The vLLM 0.27.0 record shape (02 §3.14): the committed example and the record writer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "probes" / "vllm-0.27.0-plain"
NULL_SETTINGS = {  # the keys marked ⁰ in 02 §3.4
    ("cache", "mamba_cache_mode"), ("cache", "mamba_block_size"), ("cache", "prefix_match_unit"),
    ("cache", "hash_block_size"), ("cache", "kv_cache_layout"), ("cache", "prefix_cache_retention_interval"),
    ("scheduler", "max_in_flight_tokens"),
}  # fmt: skip


def _records():
    index = json.loads((EXAMPLE / "observations.json").read_text())
    (conf,) = index["configurations"].values()
    out = []
    for entry in conf["attempts"][0]["phases"].values():
        out += [json.loads((EXAMPLE / a["path"]).read_text()) for a in entry["artifacts"] if a["kind"] == "observation"]
    return conf, out


def test_example_has_no_hybrid_evidence():
    """02 §3.14: no prefix_caching, no state/layer_specs/spec_fields, the ⁰ keys null."""
    conf, records = _records()
    assert conf["launch"]["identity"]["framework_version"] == "0.27.0"
    assert len(records) == 4
    for r in records:
        assert "prefix_caching" not in r
        assert r["runtime"]["version"] == "0.27.0" and r["observer"]["plugin"] == "fpmcore-vllm027"
        assert all(r["settings"][s][k] is None for s, k in NULL_SETTINGS) and r["settings"]["model_runner"] is None
        for g in r["cache"]["groups"]:
            assert g["startup_blocks_per_request"] is None
            assert not {"state", "layer_specs", "spec_fields"} & set(g)
            assert g["spec_class"] == "vllm.v1.kv_cache_interface.FullAttentionSpec"
        if r["binding"]["kind"] == "worker":
            c = r["cache"]
            assert (c["kv_cache_layout"], c["attention_groups"], c["model_runner"]) == (None, None, None)
            assert c["groups"][0]["kind"] == "attention"
        else:
            c = r["cache"]
            assert all(
                c[k] is None for k in ("hash_block_size", "cache_hit_alignment_tokens", "mamba_cache_mode", "startup")
            )
            assert set(c["groups"][0]) == {"group_id", "layer_names", "spec_class", "block_size_tokens", "page_size_bytes",
                                           "sliding_window", "prefix_cacheable", "host_resident", "role",
                                           "startup_blocks_per_request"}  # fmt: skip


def test_example_allocations_take_the_whole_form_of_i76():
    """02 §3.14 I-76: vLLM 0.27.0 plans one ``KVCacheTensor(size, shared_by=[layer])`` per layer of a plain
    model, not packed (``block_stride`` 0): a whole allocation at offset 0 whose slot size / n is the page."""
    _, records = _records()
    for worker in (r for r in records if r["binding"]["kind"] == "worker"):
        c = worker["cache"]
        n = c["num_blocks"]
        (group,) = c["groups"]
        assert n == 9_536 == 20_000_000_000 // (32 * group["page_size_bytes"])  # get_num_blocks of vLLM 0.27.0
        assert [a["layers"] for a in c["allocations"]] == [[name] for name in group["layer_names"]]
        for a in c["allocations"]:
            assert (a["layer_stride"], a["offset"], a["block_stride"]) == (None, 0, 0)
            assert a["size"] == n * group["page_size_bytes"]
        assert group["page_size_bytes"] == 2 * 16 * 8 * 128 * 2  # K and V, 16 tokens, 8 heads x 128, bf16
        assert "cache.allocations[0].storage_id" in worker["unresolved_fields"]
        assert not any(f.endswith(".block_stride") for f in worker["unresolved_fields"])


def test_hooks_reach_the_plugin_only_for_0_27_0(fpm_host):
    """02 §4: the host selects vllm_027 for exactly ``vllm==0.27.0``; another pin never reaches it."""
    from fpmcore.documents.errors import FpmError

    host = fpm_host(entry_points=("vllm_027", "vllm_033"))
    assert host.hooks.runtime("vllm==0.27.0").plugin == "vllm_027"
    assert host.hooks.runtime("vllm==0.33.0").plugin == "vllm_033"
    for pin in ("vllm==0.27.1", "vllm==0.27"):
        with pytest.raises(FpmError, match="no runtime plugin for"):
            host.hooks.runtime(pin).observe_cache_groups(source={}, phase="prefill", rank=0)


def test_observer_imports_without_vllm(monkeypatch):
    import importlib

    for mod in ("vllm", "torch"):
        monkeypatch.setitem(sys.modules, mod, None)
    monkeypatch.delitem(sys.modules, "fpmcore_vllm027.observe", raising=False)
    importlib.import_module("fpmcore_vllm027.observe")


def test_example_runtime_is_the_installed_vllm_0_27_0():
    """02 §3.2, I-26: the example was planned by the installed vLLM 0.27.0 wheel: its files are the release's
    (the pinned hashes) and ``source_revision`` is the digest the dry-run image names."""
    from fpmcore_vllm027.observe import SOURCE_FILES

    conf, records = _records()
    digest = conf["launch"]["deployment"]["image"].split("@sha256:")[1]
    for r in records:
        assert r["runtime"]["source_files"] == SOURCE_FILES
        assert r["runtime"]["source_revision"] == digest and r["runtime"]["image"].endswith(digest)


def test_dry_probe_of_another_pin_never_reaches_the_plugin(fpm_host, tmp_path):
    from fpmcore.documents.errors import FpmError

    host = fpm_host(entry_points=("vllm_027",))
    for pin in ("vllm==0.33.0", "vllm==0.27.1", "vllm==0.27"):
        with pytest.raises(FpmError, match="no runtime plugin for"):
            host.hooks.runtime(pin).dry_probe(model_path="m.json", out_dir=str(tmp_path), tp=1, caching=True,
                                              configuration=None)  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_probe_imports_without_vllm(monkeypatch):
    import importlib

    for mod in ("vllm", "torch"):
        monkeypatch.setitem(sys.modules, mod, None)
    monkeypatch.delitem(sys.modules, "fpmcore_vllm027.probe", raising=False)
    importlib.import_module("fpmcore_vllm027.probe")

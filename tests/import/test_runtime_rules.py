"""The import reads every version-specific rule from the runtime plugins (``fpm_runtime_rules``).

* I-22 names the versions whose installed plugin imports hybrid evidence
  (02 §4 names vLLM 0.33.0: the ``vllm_033`` plugin);
* a plugin for another version that imports hybrid evidence takes a hybrid
  record through every stage, its version in I-43 and I-61;
* records without hybrid evidence use the plugin's §5.1 table (02 §5.1), not
  its hybrid class table;
* a runtime plugin that gives no rules is read with the defaults of
  :class:`~fpmcore.host.hooktypes.ImportRules` (no KV dtype label but ``auto``'s).
"""

from __future__ import annotations

import attrs
import fpm_import_attn_fixture as A

from fpmcore import API_VERSION, PluginInfo, SpecClassification, hookimpl


def _rules(result):
    return [(d.rule, d.message) for d in result.diagnostics]


def _services(*plugins, entry_points=("vllm_027", "vllm_033")):
    from fpmcore.importer import HostServices
    from fpmcore.testing import make_host

    return HostServices(make_host(*plugins, entry_points=entry_points))


class Hybrid034:
    """A runtime plugin for vLLM 0.34.0 that reuses vLLM 0.33.0's class table and rules."""

    @hookimpl
    def fpm_plugin_info(self):
        return PluginInfo(id="vllm_034", kind="runtime", targets=("vllm==0.34.0",), api_version=API_VERSION)

    @hookimpl
    def fpm_classify_spec(self, runtime, spec_class, spec):
        from fpmcore_vllm033.classes import classify

        return classify(spec_class) if runtime == "vllm==0.34.0" else None

    @hookimpl
    def fpm_runtime_rules(self, runtime):
        from fpmcore_vllm033.rules import RULES

        return attrs.evolve(RULES, version="0.34.0") if runtime == "vllm==0.34.0" else None


class PlainOnly0331:
    """A runtime plugin for vLLM 0.33.1 with a class table and no rules."""

    @hookimpl
    def fpm_plugin_info(self):
        return PluginInfo(id="vllm_0331", kind="runtime", targets=("vllm==0.33.1",), api_version=API_VERSION)

    @hookimpl
    def fpm_classify_spec(self, runtime, spec_class, spec):
        if runtime != "vllm==0.33.1":
            return None
        return SpecClassification(kind="attention") if spec_class == A.MOD + "FullAttentionSpec" else None


def test_i22_names_every_version_that_imports_hybrid_evidence(run_import):
    """I-22 with a second hybrid plugin: the versions in plugin order, joined with ``or``."""
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.32.0", hybrid=True)
    assert ("I-22", "hybrid cache evidence requires vLLM 0.33.0 or 0.34.0; the record names vLLM 0.32.0") in _rules(
        run_import(ev, services=_services(Hybrid034()))
    )


def test_i22_without_a_hybrid_plugin(run_import):
    """Without ``vllm_033`` no installed plugin imports hybrid evidence: even a 0.33.0 record is refused by I-22."""
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.33.0", hybrid=True)
    assert set(_rules(run_import(ev, services=_services(entry_points=("vllm_027",))))) == {
        ("I-22", "hybrid cache evidence requires a runtime plugin that imports it; none is installed; "
                 "the record names vLLM 0.33.0")}  # fmt: skip


def test_hybrid_record_of_another_hybrid_plugin_imports(run_import):
    """Nothing in the import names 0.33.0: a 0.34.0 plugin with the same rules imports the same layout."""
    ev = A.AttnEvidence(
        [("FullAttentionSpec", 4, None), ("SlidingWindowSpec", 4, 4096)], version="0.34.0", num_blocks=5000
    )
    result = run_import(ev, services=_services(Hybrid034()))
    assert result.complete, [d.render() for d in result.diagnostics]
    assert result.results[0].draft["deployments"][0]["backend_version"] == "0.34.0"


def test_i61_names_the_records_version(run_import):
    """I-61's message names the version of the rules that computed C-1."""
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.34.0")
    for r in ev.phase_records("prefill"):
        r["cache"]["groups"][0]["startup_blocks_per_request"] = 7
    assert (
        "I-61",
        "cache group 0 records startup_blocks_per_request 7, but vLLM 0.34.0 reserves 2048 (cdiv(32768, 16))",
    ) in _rules(run_import(ev, services=_services(Hybrid034())))


def test_plain_record_uses_the_plain_table_not_the_hybrid_one(run_import):
    """02 §5.1 whatever the version: vLLM 0.33.0's own table makes MLA attention, its plain table refuses it."""
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.33.0", hybrid=False)
    for r in ev.phase_records("prefill"):
        r["cache"]["groups"][0]["spec_class"] = A.MOD + "MLAAttentionSpec"
    assert (
        "I-41",
        "unsupported runtime cache spec: vllm.v1.kv_cache_interface.MLAAttentionSpec (records without "
        "hybrid evidence allow FullAttentionSpec and SlidingWindowSpec): group 0",
    ) in _rules(run_import(ev))


def test_a_plugin_without_rules_labels_only_auto(run_import):
    """Default rules: ``auto`` takes the model dtype's label; any other KV dtype has none (I-32)."""
    services = _services(PlainOnly0331())
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.33.1", hybrid=False)
    assert run_import(ev, services=services).complete
    for r in ev.all_records():
        r["settings"]["cache"]["kv_cache_dtype"] = "bfloat16"
    assert ("I-32", "observed KV cache dtype 'bfloat16' has no label") in _rules(run_import(ev, services=services))
    ev = A.AttnEvidence([("FullAttentionSpec", 4, None)], version="0.33.0", hybrid=False)
    for r in ev.all_records():
        r["settings"]["cache"]["kv_cache_dtype"] = "bfloat16"
    assert run_import(ev).complete  # vLLM 0.33.0's table labels it

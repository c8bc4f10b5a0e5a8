"""The vLLM runtime plugins are :class:`VllmRuntimePlugin` objects: their hooks through the host."""

from __future__ import annotations

import sys

import pytest

from fpmcore import hookspecs
from fpmcore_vllm_support.plugin import VllmRuntimePlugin

RUNTIME_HOOKS = {"fpm_classify_spec", "fpm_runtime_rules", "fpm_observe_cache_groups", "fpm_dry_probe"}


@pytest.fixture(scope="module")
def host():
    from fpmcore.testing import make_host

    return make_host(entry_points=("vllm_027", "vllm_033"))


@pytest.mark.parametrize(("plugin_id", "pin"), [("vllm_027", "vllm==0.27.0"), ("vllm_033", "vllm==0.33.0")])
def test_each_release_is_one_plugin_object(host, plugin_id, pin):
    rec = host.record(plugin_id)
    assert (rec.kind, rec.targets, rec.status, rec.module) == (
        "runtime",
        (pin,),
        "ok",
        f"fpmcore_{plugin_id.replace('_', '')}:plugin",
    )
    assert RUNTIME_HOOKS <= set(rec.hooks)
    assert isinstance(host.pm.get_plugin(plugin_id), VllmRuntimePlugin)
    assert host.hooks.runtime(pin).plugin == plugin_id


def test_no_runtime_hook_implementation_takes_the_runtime_argument(host):
    """The host calls a runtime plugin only for its own pin: no implementation can compare ``runtime`` with it."""
    for name in sorted(RUNTIME_HOOKS | {"fpm_normalize_record"}):
        assert "runtime" in getattr(hookspecs, name).__code__.co_varnames  # the spec keeps it (several pins)
        for impl in getattr(host.pm.hook, name).get_hookimpls():
            if impl.plugin_name in ("vllm_027", "vllm_033"):
                assert "runtime" not in impl.argnames, (impl.plugin_name, name)


def test_loading_the_plugins_imports_no_runtime(monkeypatch):
    """Plugins never import vLLM or torch at module level; the observer and probe load when a hook needs them."""
    import importlib

    for mod in ("vllm", "torch"):
        monkeypatch.setitem(sys.modules, mod, None)
    for name in [m for m in sys.modules if m.startswith(("fpmcore_vllm", "fpmcore_vllm_support"))]:
        monkeypatch.delitem(sys.modules, name)
    for name in ("fpmcore_vllm_support", "fpmcore_vllm_support.plugin", "fpmcore_vllm_support.observe",
                 "fpmcore_vllm_support.dryprobe", "fpmcore_vllm_support.rules", "fpmcore_vllm027",
                 "fpmcore_vllm027.observe", "fpmcore_vllm027.probe", "fpmcore_vllm033", "fpmcore_vllm033.observe",
                 "fpmcore_vllm033.probe"):  # fmt: skip
        importlib.import_module(name)


def test_classify_and_rules_through_the_host(host):
    mamba = "vllm.v1.kv_cache_interface.MambaSpec"
    old, new = host.hooks.runtime("vllm==0.27.0"), host.hooks.runtime("vllm==0.33.0")
    assert old.classify_spec(spec_class=mamba, spec={}).kind == "unsupported"
    assert new.classify_spec(spec_class=mamba, spec={}).kind == "state"
    # 02 §5.1 is one table, whatever the version
    full = "vllm.v1.kv_cache_interface.FullAttentionSpec"
    assert old.rules().classify_plain(mamba) == new.rules().classify_plain(mamba)
    assert old.rules().classify_plain(full) == new.rules().classify_plain(full)
    assert old.rules().kv_dtype_labels == new.rules().kv_dtype_labels
    assert old.rules().nullable_settings == new.rules().nullable_settings == {"compilation.max_cudagraph_capture_size"}


def test_loading_a_plugin_imports_its_rules_only_when_a_hook_reads_them():
    """``fpm --help`` and ``fpm plugins`` load every plugin: its pin comes from ``version``; its rules, class table
    and replay rules are imported by the first hook that reads them."""
    import subprocess

    code = """if True:
        import sys
        from fpmcore_vllm033 import plugin
        parts = ("fpmcore_vllm033.rules", "fpmcore_vllm033.classes", "fpmcore_vllm033.replay",
                 "fpmcore.host.stage_hooktypes")
        print(plugin.fpm_plugin_info().targets, [m for m in parts if m in sys.modules])
        print(plugin.fpm_replay_rules().runtime, [m for m in parts if m in sys.modules])
        print(plugin.fpm_runtime_rules().version, [m for m in parts if m in sys.modules])
        print(plugin.fpm_classify_spec("vllm.v1.kv_cache_interface.MambaSpec").kind, [m for m in parts if m in sys.modules])
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "('vllm==0.33.0',) []",
        "vllm==0.33.0 ['fpmcore_vllm033.replay']",
        "0.33.0 ['fpmcore_vllm033.rules', 'fpmcore_vllm033.replay', 'fpmcore.host.stage_hooktypes']",
        "state ['fpmcore_vllm033.rules', 'fpmcore_vllm033.classes', 'fpmcore_vllm033.replay', "
        "'fpmcore.host.stage_hooktypes']",
    ]


def test_rules_of_another_release_fail_the_hook_naming_the_plugin():
    """A plugin whose ``rules_from`` names another release's rules: the hook that reads them fails, the host says
    which plugin and why (the CLI prints it as one line)."""
    from fpmcore.documents.errors import PluginError
    from fpmcore.testing import make_host

    plugin = VllmRuntimePlugin("vllm_033_mixed", "fpmcore_vllm033", "fpmcore-vllm033", "0.33.0",
                               rules_from="fpmcore_vllm027.rules:RULES", classify_from="fpmcore_vllm033.classes:classify")  # fmt: skip
    host = make_host(plugin)
    assert host.record("vllm_033_mixed").targets == ("vllm==0.33.0",)
    with pytest.raises(PluginError) as raised:
        host.hooks.runtime("vllm==0.33.0").rules()
    assert "plugin 'vllm_033_mixed' failed in fpm_runtime_rules: ValueError: vllm_033_mixed: " in str(raised.value)
    assert "fpmcore_vllm027.rules:RULES are the rules of '0.27.0', the plugin targets '0.33.0'" in str(raised.value)

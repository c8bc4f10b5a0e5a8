"""The import asks the runtime plugins through the host's hooks (normalize, classify, runtime selection)."""

from __future__ import annotations

import fpm_import_glm_fixture as G
import pytest


@pytest.mark.parametrize("pin,plugin", [("vllm==0.33.0", "vllm_033"), ("vllm==0.27.0", "vllm_027")])
def test_normalize_record_hook(host, pin, plugin):
    """``fpm_normalize_record``: a new mapping with the record's content, from the plugin of the pin only.

    Neither runtime plugin normalizes (their records have the form the rules
    read), so the host's default stands; a pin no plugin targets has no runtime.
    """
    from fpmcore.documents.errors import FpmError

    assert "fpm_normalize_record" not in host.record(plugin).hooks
    record = G.record("prefill", "worker", 0)
    runtime = host.hooks.runtime(pin)
    out = runtime.normalize_record(record=record)
    assert runtime.plugin == plugin and out == record and out is not record
    with pytest.raises(FpmError, match=r"no runtime plugin for vllm==0\.33\.1"):
        host.hooks.runtime("vllm==0.33.1")


def test_services_select_runtime_by_exact_version(services):
    """I-25's plugin gate: exact strings, no PEP 440 normalization."""
    assert services.has_runtime("vllm==0.33.0") and services.has_runtime("vllm==0.27.0")
    for version in ("0.33", "0.33.0.post1", "0.33.1", "v0.33.0", "0.33.0 "):
        assert not services.has_runtime(f"vllm=={version}")
    assert services.installed() == "vllm_027 (0.27.0), vllm_033 (0.33.0)"


def test_normalization_is_applied(evidence, run_import, host):
    """Every record goes through its plugin's normalization before stage D (02 §3.14)."""
    from fpmcore import hookimpl
    from fpmcore.importer import HostServices
    from fpmcore.testing import make_host

    class Marker:
        """A wrapper of the normalization that breaks the records: the import must then refuse them."""

        @hookimpl(wrapper=True)
        def fpm_normalize_record(self, runtime, record):
            normalized = yield
            out = dict(normalized if normalized is not None else record)
            out["settings"] = dict(record["settings"], speculative={"num_speculative_tokens": 1})
            return out

        @hookimpl
        def fpm_plugin_info(self):
            from fpmcore import API_VERSION, PluginInfo

            return PluginInfo(id="marker", kind="model", targets=("marker",), api_version=API_VERSION)

    marked = HostServices(make_host(Marker(), entry_points=("vllm_027", "vllm_033")))
    result = run_import(evidence, services=marked)
    assert ("I-30", "speculative or transferred cache semantics are unsupported") in [
        (d.rule, d.message) for d in result.diagnostics
    ]
